package deploy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/mcp-proxy/mcp-proxy/config"
)

const redisManifestPath = "kubernetes/mcp-proxy-redis.yaml"

// redisStatefulSet holds the fields of the Redis StatefulSet the checks
// read.
type redisStatefulSet struct {
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []container `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestKubernetesRedisManifest checks the Redis variant: three replicas
// behind a Service without affinity, a config that passes validation with
// the Deployment's env and names the Redis Service, and a Redis that
// fsyncs its append-only file on every write.
func TestKubernetesRedisManifest(t *testing.T) {
	data, err := os.ReadFile(redisManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest{}
	var redisSet redisStatefulSet
	services := map[string]service{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var obj k8sObject
		if err := doc.Decode(&obj); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var target any
		switch {
		case obj.Kind == "ConfigMap" && obj.Metadata.Name == "mcp-proxy":
			target = &m.configMap
		case obj.Kind == "Deployment" && obj.Metadata.Name == "mcp-proxy":
			target = &m.deployment
		case obj.Kind == "StatefulSet" && obj.Metadata.Name == "mcp-proxy-redis":
			target = &redisSet
		case obj.Kind == "Service":
			var s service
			if err := doc.Decode(&s); err != nil {
				t.Fatalf("document %d: %v", i, err)
			}
			services[obj.Metadata.Name] = s
			continue
		default:
			t.Fatalf("document %d: unexpected %s %q", i, obj.Kind, obj.Metadata.Name)
		}
		if err := doc.Decode(target); err != nil {
			t.Fatalf("document %d (%s): %v", i, obj.Kind, err)
		}
	}
	m.service = services["mcp-proxy"]

	if r := m.deployment.Spec.Replicas; r == nil || *r != 3 {
		t.Errorf("Deployment replicas = %v, want 3", r)
	}
	if a := m.service.Spec.SessionAffinity; a != "" && a != "None" {
		t.Errorf("Service sessionAffinity = %q, want none: any replica serves any session", a)
	}
	c := proxyContainer(t, m)
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			env[e.Name] = *e.Value
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "test-secret-" + e.Name
		}
	}
	env["MCP_PROXY_STORE_KEY"] = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=" // a key of the right shape
	text := m.configMap.Data[path.Base(argAfter(c.Args, "--config"))]
	cfg, err := config.Parse([]byte(text), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("the ConfigMap's config does not pass config.Parse:\n%v", err)
	}
	if cfg.Store.Type != config.StoreRedis {
		t.Fatalf("store.type = %q, want redis", cfg.Store.Type)
	}
	u, err := url.Parse(cfg.Store.URL)
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := u.User.Password(); pw != "test-secret-REDIS_PASSWORD" {
		t.Errorf("store.url's password is not the Secret's redis-password")
	}
	host, port, _ := net.SplitHostPort(u.Host)
	rs, ok := services[host]
	if !ok {
		t.Fatalf("store.url names host %q, which is no Service of the manifest", host)
	}
	for k, v := range rs.Spec.Selector {
		if redisSet.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, not the Redis StatefulSet", host, k, v)
		}
	}
	if len(redisSet.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Redis StatefulSet has %d containers, want 1", len(redisSet.Spec.Template.Spec.Containers))
	}
	redis := redisSet.Spec.Template.Spec.Containers[0]
	portOK := false
	for _, p := range rs.Spec.Ports {
		target, err := containerPort(redis, p.TargetPort)
		if err == nil && strconv.Itoa(p.Port) == port && target == 6379 {
			portOK = true
		}
	}
	if !portOK {
		t.Errorf("Service %s has no port %s that reaches Redis's 6379", host, port)
	}
	for _, want := range [][]string{{"--appendonly", "yes"}, {"--appendfsync", "always"}, {"--requirepass", "$(REDIS_PASSWORD)"}} {
		i := slices.Index(redis.Args, want[0])
		if i < 0 || i+1 >= len(redis.Args) || redis.Args[i+1] != want[1] {
			t.Errorf("Redis args %q lack %s %s", redis.Args, want[0], want[1])
		}
	}
	if r := redisSet.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("Redis replicas = %v, want 1 (one primary; Sentinel is a separate setup)", r)
	}
}
