package deploy

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"
)

const unitPath = "systemd/mcp-proxy.service"

// unit is a parsed systemd unit file: section -> key -> values in file
// order (a key may repeat, as Environment= does).
type unit map[string]map[string][]string

// parseUnit reads the systemd unit syntax: [Section] headers, Key=Value
// lines, comments starting with # or ;, and lines continued by a trailing
// backslash. A line outside a section or without '=' is an error.
func parseUnit(text string) (unit, error) {
	u := unit{}
	var section string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[':
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: bad section header %q", lineNo, line)
			}
			section = line[1 : len(line)-1]
			if u[section] != nil {
				return nil, fmt.Errorf("line %d: section [%s] twice", lineNo, section)
			}
			u[section] = map[string][]string{}
			continue
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: %q is outside any section", lineNo, line)
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not Key=Value", lineNo, line)
		}
		key = strings.TrimSpace(key)
		u[section][key] = append(u[section][key], strings.TrimSpace(value))
	}
	return u, nil
}

// one returns the single value of section.key, or an error naming it.
func (u unit) one(section, key string) (string, error) {
	vs := u[section][key]
	if len(vs) != 1 {
		return "", fmt.Errorf("[%s] %s= is set %d times, want once", section, key, len(vs))
	}
	return vs[0], nil
}

// parseTimespan reads the systemd time span forms a unit would use for
// TimeoutStopSec: "20", "20s", "1min 30s", "500ms", "2m", "1h", "infinity".
func parseTimespan(s string) (time.Duration, error) {
	if s == "infinity" {
		return time.Duration(1<<63 - 1), nil
	}
	units := []struct {
		suffix string
		d      time.Duration
	}{
		{"msec", time.Millisecond}, {"ms", time.Millisecond},
		{"seconds", time.Second}, {"second", time.Second}, {"sec", time.Second}, {"s", time.Second},
		{"minutes", time.Minute}, {"minute", time.Minute}, {"min", time.Minute}, {"m", time.Minute},
		{"hours", time.Hour}, {"hour", time.Hour}, {"hr", time.Hour}, {"h", time.Hour},
	}
	var total time.Duration
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0, fmt.Errorf("empty time span")
	}
	for _, f := range fields {
		num := strings.TrimRightFunc(f, func(r rune) bool { return r < '0' || r > '9' })
		suffix := f[len(num):]
		n, err := strconv.Atoi(num)
		if err != nil {
			return 0, fmt.Errorf("time span %q: %w", s, err)
		}
		d := time.Duration(-1)
		if suffix == "" {
			d = time.Second
		}
		for _, u := range units {
			if suffix == u.suffix {
				d = u.d
				break
			}
		}
		if d < 0 {
			return 0, fmt.Errorf("time span %q: unknown unit %q", s, suffix)
		}
		total += time.Duration(n) * d
	}
	return total, nil
}

func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	u, err := parseUnit(string(data))
	if err != nil {
		t.Fatalf("%s: %v", unitPath, err)
	}
	for _, s := range []string{"Unit", "Service", "Install"} {
		if u[s] == nil {
			t.Errorf("no [%s] section", s)
		}
	}
	must := func(section, key string) string {
		t.Helper()
		v, err := u.one(section, key)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	exec := strings.Fields(must("Service", "ExecStart"))
	if len(exec) < 2 || !path.IsAbs(exec[0]) || path.Base(exec[0]) != "mcp-proxy" || exec[1] != "serve" {
		t.Errorf("ExecStart=%s: want /absolute/path/mcp-proxy serve ...", strings.Join(exec, " "))
	}
	cfgPath := argAfter(exec, "--config")
	if !path.IsAbs(cfgPath) {
		t.Errorf("ExecStart gives --config %q, want an absolute path (the working directory is /)", cfgPath)
	}
	if dir := must("Service", "ConfigurationDirectory"); path.Dir(cfgPath) != "/etc/"+dir {
		t.Errorf("--config %s is not in ConfigurationDirectory=%s (/etc/%s)", cfgPath, dir, dir)
	}
	if typ := must("Service", "Type"); typ != "exec" && typ != "simple" {
		t.Errorf("Type=%s: the proxy stays in the foreground and does not notify, want exec or simple", typ)
	}
	if v := must("Service", "KillSignal"); v != "SIGTERM" {
		t.Errorf("KillSignal=%s, want SIGTERM (the proxy's graceful shutdown signal)", v)
	}
	// With the default control-group mode the stdio servers would get
	// SIGTERM together with the proxy, before it has finished the calls in
	// flight and closed them in order.
	if v := must("Service", "KillMode"); v != "mixed" {
		t.Errorf("KillMode=%s, want mixed", v)
	}
	stop, err := parseTimespan(must("Service", "TimeoutStopSec"))
	if err != nil {
		t.Fatal(err)
	}
	if stop < 15*time.Second {
		t.Errorf("TimeoutStopSec is %s, want at least 15s (10 s for calls in flight, 5 s to close stdio servers)", stop)
	}
	if v := must("Service", "ExecReload"); !strings.Contains(v, "-HUP") || !strings.Contains(v, "$MAINPID") {
		t.Errorf("ExecReload=%s, want SIGHUP to $MAINPID (the proxy reloads its config on SIGHUP)", v)
	}
	if v := must("Service", "RestartPreventExitStatus"); !strings.Contains(" "+v+" ", " 2 ") {
		t.Errorf("RestartPreventExitStatus=%s, want it to include 2 (config error: a restart cannot fix it)", v)
	}
	if len(u["Install"]["WantedBy"]) == 0 {
		t.Error("[Install] has no WantedBy=, so `systemctl enable` would do nothing")
	}
}

func TestParseUnit(t *testing.T) {
	u, err := parseUnit("# c\n[Service]\nExecStart=/bin/a \\\n  --b c\n; c\nEnvironment=A=1\nEnvironment=B=2\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := u["Service"]["ExecStart"]; len(got) != 1 || got[0] != "/bin/a  --b c" {
		t.Errorf("continued ExecStart = %q", got)
	}
	if got := u["Service"]["Environment"]; len(got) != 2 || got[0] != "A=1" || got[1] != "B=2" {
		t.Errorf("repeated Environment = %q", got)
	}
	for _, bad := range []string{"Key=value\n", "[Unit\n", "[Unit]\nnot a pair\n", "[A]\n[A]\n"} {
		if _, err := parseUnit(bad); err == nil {
			t.Errorf("parseUnit(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseTimespan(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"20", 20 * time.Second, false},
		{"20s", 20 * time.Second, false},
		{"1min 30s", 90 * time.Second, false},
		{"500ms", 500 * time.Millisecond, false},
		{"2m", 2 * time.Minute, false},
		{"1h", time.Hour, false},
		{"", 0, true},
		{"20xyz", 0, true},
		{"s", 0, true},
	}
	for _, tc := range tests {
		got, err := parseTimespan(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseTimespan(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}
