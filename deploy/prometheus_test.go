package deploy

import (
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const scrapePath = "kubernetes/prometheus-scrape.yaml"

type scrapeFile struct {
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		Authorization *struct {
			Type            string `yaml:"type"`
			CredentialsFile string `yaml:"credentials_file"`
		} `yaml:"authorization"`
		KubernetesSDConfigs []struct {
			Role string `yaml:"role"`
		} `yaml:"kubernetes_sd_configs"`
		RelabelConfigs []relabel `yaml:"relabel_configs"`
	} `yaml:"scrape_configs"`
}

type relabel struct {
	SourceLabels []string `yaml:"source_labels"`
	Regex        string   `yaml:"regex"`
	Action       string   `yaml:"action"`
	TargetLabel  string   `yaml:"target_label"`
	Replacement  string   `yaml:"replacement"`
}

// TestPrometheusScrapeConfig checks the scrape job against the manifest: the
// metrics listener requires a token (metrics.tokens, from an env variable
// the Deployment fills from a Secret key), and the job sends that same
// Secret key as its bearer token, scraping pods by the annotations the
// Deployment sets.
func TestPrometheusScrapeConfig(t *testing.T) {
	m := loadManifest(t)
	c := proxyContainer(t, m)
	cfg := proxyConfig(t, m, c)
	if len(cfg.Metrics.Tokens) == 0 {
		t.Fatal("the example's metrics listener is not loopback and has no metrics.tokens")
	}

	// Which Secret key holds the metrics token: the ConfigMap's
	// metrics.tokens names a variable, the Deployment fills it.
	ref := regexp.MustCompile(`tokens: \["\$\{([A-Z_]+)\}"\]`).FindStringSubmatch(m.configMap.Data["config.yaml"])
	if ref == nil {
		t.Fatal(`the ConfigMap's metrics.tokens is not ["${VAR}"]`)
	}
	var secret, key string
	for _, e := range c.Env {
		if e.Name == ref[1] && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secret, key = e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key
		}
	}
	if key == "" {
		t.Fatalf("the Deployment does not fill %s from a Secret", ref[1])
	}

	data, err := os.ReadFile(scrapePath)
	if err != nil {
		t.Fatal(err)
	}
	var sf scrapeFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&sf); err != nil {
		t.Fatalf("%s: %v", scrapePath, err)
	}
	if len(sf.ScrapeConfigs) != 1 {
		t.Fatalf("%s has %d jobs, want 1", scrapePath, len(sf.ScrapeConfigs))
	}
	job := sf.ScrapeConfigs[0]
	if job.Authorization == nil || job.Authorization.Type != "Bearer" {
		t.Fatalf("the job sends no bearer token: %+v", job.Authorization)
	}
	if want := path.Join("/etc/prometheus/secrets", secret, key); job.Authorization.CredentialsFile != want {
		t.Errorf("credentials_file = %q, want %q (Secret %s, key %s, as the Deployment reads it)", job.Authorization.CredentialsFile, want, secret, key)
	}
	if len(job.KubernetesSDConfigs) != 1 || job.KubernetesSDConfigs[0].Role != "pod" {
		t.Errorf("the job must discover pods (each replica has its own metrics): %+v", job.KubernetesSDConfigs)
	}
	ann := m.deployment.Spec.Template.Metadata.Annotations
	uses := func(label string) bool {
		return slices.ContainsFunc(job.RelabelConfigs, func(r relabel) bool { return slices.Contains(r.SourceLabels, label) })
	}
	for a := range ann {
		label := "__meta_kubernetes_pod_annotation_" + strings.NewReplacer(".", "_", "/", "_").Replace(a)
		if strings.HasPrefix(a, "prometheus.io/") && !uses(label) {
			t.Errorf("the job ignores the pod annotation %s", a)
		}
	}
}
