package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/mcp-proxy/mcp-proxy/config"
)

const manifestPath = "kubernetes/mcp-proxy.yaml"

// Only the fields the checks read; the rest of each object is ignored.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
}

type configMap struct {
	Data map[string]string `yaml:"data"`
}

type deployment struct {
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsUser *int `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
				Volumes    []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string  `yaml:"name"`
		Value     *string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports          []containerPortSpec `yaml:"ports"`
	LivenessProbe  *probe              `yaml:"livenessProbe"`
	ReadinessProbe *probe              `yaml:"readinessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type containerPortSpec struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"` // a number or a port name
	} `yaml:"httpGet"`
}

type service struct {
	Spec struct {
		Selector        map[string]string `yaml:"selector"`
		SessionAffinity string            `yaml:"sessionAffinity"`
		Ports           []struct {
			Name       string    `yaml:"name"`
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// manifest is the parsed Kubernetes file: one of each kind.
type manifest struct {
	configMap  configMap
	deployment deployment
	service    service
}

// readManifest decodes every YAML document of the file and picks out the
// three objects by kind. Any other kind, a repeated kind, a document
// without a name or a wrong apiVersion is an error.
func readManifest(data []byte) (*manifest, error) {
	wantAPI := map[string]string{"ConfigMap": "v1", "Deployment": "apps/v1", "Service": "v1"}
	m := &manifest{}
	seen := map[string]bool{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var obj k8sObject
		if err := doc.Decode(&obj); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		api, known := wantAPI[obj.Kind]
		switch {
		case !known:
			return nil, fmt.Errorf("document %d: unexpected kind %q", i, obj.Kind)
		case seen[obj.Kind]:
			return nil, fmt.Errorf("document %d: a second %s", i, obj.Kind)
		case obj.APIVersion != api:
			return nil, fmt.Errorf("document %d: %s has apiVersion %q, want %q", i, obj.Kind, obj.APIVersion, api)
		case obj.Metadata.Name == "":
			return nil, fmt.Errorf("document %d: %s has no metadata.name", i, obj.Kind)
		}
		seen[obj.Kind] = true
		var target any
		switch obj.Kind {
		case "ConfigMap":
			target = &m.configMap
		case "Deployment":
			target = &m.deployment
		case "Service":
			target = &m.service
		}
		if err := doc.Decode(target); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, obj.Kind, err)
		}
	}
	for _, kind := range []string{"ConfigMap", "Deployment", "Service"} {
		if !seen[kind] {
			return nil, fmt.Errorf("no %s in the manifest", kind)
		}
	}
	return m, nil
}

func loadManifest(t *testing.T) *manifest {
	t.Helper()
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := readManifest(data)
	if err != nil {
		t.Fatalf("%s: %v", manifestPath, err)
	}
	return m
}

// proxyContainer is the Deployment's only container.
func proxyContainer(t *testing.T, m *manifest) container {
	t.Helper()
	cs := m.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(cs))
	}
	return cs[0]
}

// containerPort resolves a probe's or Service's port (a number or the
// name of a container port) to a number.
func containerPort(c container, n yaml.Node) (int, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, errors.New("port is not a scalar")
	}
	if p, err := strconv.Atoi(n.Value); err == nil && n.ShortTag() == "!!int" {
		return p, nil
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("port %q names no container port", n.Value)
}

// proxyConfig parses the ConfigMap's config the way the container would:
// ${VAR} references resolve only from the container's env, so a
// reference to a variable the Deployment does not set fails here.
func proxyConfig(t *testing.T, m *manifest, c container) *config.Config {
	t.Helper()
	configPath := argAfter(c.Args, "--config")
	if configPath == "" {
		t.Fatalf("container args %q have no --config", c.Args)
	}
	dir, key := path.Split(configPath)
	text, ok := m.configMap.Data[key]
	if !ok {
		t.Fatalf("--config %s: the ConfigMap has no key %q", configPath, key)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) != path.Clean(dir) {
			continue
		}
		for _, v := range m.deployment.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Fatalf("no ConfigMap volume is mounted at %s, the directory of --config", dir)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			env[e.Name] = *e.Value
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "test-secret-" + e.Name
		default:
			t.Errorf("env %s has neither value nor secretKeyRef", e.Name)
		}
	}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	cfg, err := config.Parse([]byte(text), lookup)
	if err != nil {
		t.Fatalf("the ConfigMap's %s does not pass config.Parse:\n%v", key, err)
	}
	if w := cfg.Warnings(); len(w) > 0 {
		t.Errorf("the ConfigMap's config has warnings: %q", w)
	}
	return cfg
}

func argAfter(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

func addrPort(t *testing.T, what, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", what, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s %q: %v", what, addr, err)
	}
	return n
}

func TestKubernetesManifest(t *testing.T) {
	m := loadManifest(t)
	c := proxyContainer(t, m)
	cfg := proxyConfig(t, m, c)
	spec := m.deployment.Spec

	if cfg.Listen.Transport != "http" {
		t.Fatalf("config listen.transport = %q, want http", cfg.Listen.Transport)
	}
	listenPort := addrPort(t, "listen.addr", cfg.Listen.Addr)
	if cfg.Metrics.Listen == "" {
		t.Fatal("config has no metrics.listen: Prometheus would have nothing to scrape")
	}
	metricsPort := addrPort(t, "metrics.listen", cfg.Metrics.Listen)

	if r := spec.Replicas; r == nil || *r < 2 {
		t.Errorf("Deployment replicas = %v, want at least 2 (the example is about scale-out)", r)
	}
	for k, v := range spec.Selector.MatchLabels {
		if spec.Template.Metadata.Labels[k] != v {
			t.Errorf("Deployment selector %s=%s does not match the pod template's labels", k, v)
		}
	}
	if g := spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 15 {
		t.Errorf("terminationGracePeriodSeconds = %v, want at least 15 (10 s for calls in flight, 5 s to close upstreams)", g)
	}
	if c.Image == "" {
		t.Error("the container has no image")
	}

	probes := []struct {
		name string
		p    *probe
		path string
	}{
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
	}
	for _, pr := range probes {
		if pr.p == nil || pr.p.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe of %s", pr.name, pr.path)
			continue
		}
		if pr.p.HTTPGet.Path != pr.path {
			t.Errorf("%s path = %q, want %q", pr.name, pr.p.HTTPGet.Path, pr.path)
		}
		port, err := containerPort(c, pr.p.HTTPGet.Port)
		if err != nil {
			t.Errorf("%s: %v", pr.name, err)
		} else if port != listenPort && port != metricsPort {
			t.Errorf("%s port %d is neither listen.addr's %d nor metrics.listen's %d", pr.name, port, listenPort, metricsPort)
		}
	}

	ann := spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" {
		t.Errorf("pod annotation prometheus.io/scrape = %q, want \"true\"", ann["prometheus.io/scrape"])
	}
	if ann["prometheus.io/port"] != strconv.Itoa(metricsPort) {
		t.Errorf("pod annotation prometheus.io/port = %q, want %d (metrics.listen)", ann["prometheus.io/port"], metricsPort)
	}
	if ann["prometheus.io/path"] != cfg.Metrics.Path {
		t.Errorf("pod annotation prometheus.io/path = %q, want %q (metrics.path)", ann["prometheus.io/path"], cfg.Metrics.Path)
	}
	hasPort := func(n int) bool {
		return slices.ContainsFunc(c.Ports, func(p containerPortSpec) bool { return p.ContainerPort == n })
	}
	for _, p := range []int{listenPort, metricsPort} {
		if !hasPort(p) {
			t.Errorf("the container declares no port %d", p)
		}
	}

	svc := m.service.Spec
	if len(svc.Selector) == 0 {
		t.Error("Service has no selector")
	}
	for k, v := range svc.Selector {
		if spec.Template.Metadata.Labels[k] != v {
			t.Errorf("Service selector %s=%s matches no pod of the Deployment", k, v)
		}
	}
	if svc.SessionAffinity != "ClientIP" {
		t.Errorf("Service sessionAffinity = %q, want ClientIP (sessions live in one replica)", svc.SessionAffinity)
	}
	found := false
	for _, p := range svc.Ports {
		target, err := containerPort(c, p.TargetPort)
		if err != nil {
			t.Errorf("Service port %s: %v", p.Name, err)
			continue
		}
		if target == listenPort {
			found = true
		}
	}
	if !found {
		t.Errorf("no Service port targets listen.addr's port %d", listenPort)
	}
}

// TestReadManifestRejects checks that readManifest notices a broken file,
// so that TestKubernetesManifest's parse can fail.
func TestReadManifestRejects(t *testing.T) {
	good, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, input, want string
	}{
		{"syntax", string(good) + "\n---\nkind: [unclosed\n", "document 3"},
		{"unknown kind", string(good) + "\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", `unexpected kind "Pod"`},
		{"second service", string(good) + "\n---\napiVersion: v1\nkind: Service\nmetadata: {name: y}\n", "a second Service"},
		{"no service", strings.Split(string(good), "\n---\napiVersion: v1\nkind: Service")[0], "no Service"},
		{"missing kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "no Deployment"},
		{"wrong api", strings.Replace(string(good), "apps/v1", "v1", 1), `apiVersion "v1", want "apps/v1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readManifest([]byte(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("readManifest error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestDockerfileMatchesManifest checks the image the manifest runs: the
// entry point is the proxy (the container's args start with its verb),
// the user is the Deployment's runAsUser, and the Go version is go.mod's.
func TestDockerfileMatchesManifest(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	instr := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, rest, _ := strings.Cut(line, " ")
		instr[strings.ToUpper(op)] = append(instr[strings.ToUpper(op)], strings.TrimSpace(rest))
	}
	last := func(op string) string {
		v := instr[op]
		if len(v) == 0 {
			t.Fatalf("Dockerfile has no %s", op)
		}
		return v[len(v)-1]
	}

	m := loadManifest(t)
	c := proxyContainer(t, m)
	var entry, cmd []string
	if err := yaml.Unmarshal([]byte(last("ENTRYPOINT")), &entry); err != nil || len(entry) != 1 {
		t.Fatalf("ENTRYPOINT %s: want the exec form naming the binary alone (%v)", last("ENTRYPOINT"), err)
	}
	if path.Base(entry[0]) != "mcp-proxy" {
		t.Errorf("ENTRYPOINT runs %s, want mcp-proxy", entry[0])
	}
	if err := yaml.Unmarshal([]byte(last("CMD")), &cmd); err != nil {
		t.Fatalf("CMD %s: %v", last("CMD"), err)
	}
	if !slices.Equal(cmd, c.Args) {
		t.Errorf("Dockerfile CMD %q differs from the Deployment's args %q", cmd, c.Args)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("container args %q do not start with the serve verb", c.Args)
	}
	uid, _, _ := strings.Cut(last("USER"), ":")
	if ru := m.deployment.Spec.Template.Spec.SecurityContext.RunAsUser; ru == nil {
		t.Error("the pod sets no runAsUser")
	} else if strconv.Itoa(*ru) != uid {
		t.Errorf("Dockerfile USER %s differs from the pod's runAsUser %d", uid, *ru)
	}

	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var goVersion string
	for _, l := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			goVersion = strings.TrimSpace(v)
		}
	}
	parts := strings.SplitN(goVersion, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("go.mod go directive %q", goVersion)
	}
	wantImage := "golang:" + parts[0] + "." + parts[1] + "-"
	if from := instr["FROM"]; len(from) == 0 || !strings.HasPrefix(from[0], wantImage) {
		t.Errorf("the build stage is FROM %q, want %s* (go.mod says go %s)", from, wantImage, goVersion)
	}
}
