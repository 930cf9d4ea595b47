package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

const dashboardPath = "grafana/mcp-proxy.json"

// TestDashboardShape checks the Grafana dashboard as Grafana would import
// it: unique panel ids, every query on the dashboard's data source
// variable, and every mcp_proxy_* metric it names listed in docs/operations.md's
// metrics table. integration/dashboard_test.go checks the names against a
// live /metrics.
func TestDashboardShape(t *testing.T) {
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			ID         int    `json:"id"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			GridPos struct{ X, Y, W, H int } `json:"gridPos"`
			Targets []struct {
				RefID      string `json:"refId"`
				Expr       string `json:"expr"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) < 6 {
		t.Fatalf("uid %q, title %q, %d panels", d.UID, d.Title, len(d.Panels))
	}
	if len(d.Templating.List) == 0 || d.Templating.List[0].Name != "datasource" || d.Templating.List[0].Type != "datasource" {
		t.Errorf("the first template variable must be the data source, got %+v", d.Templating.List)
	}
	ids := map[int]bool{}
	var exprs []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %q, want ${datasource}", p.Title, p.Datasource.UID)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || refs[tg.RefID] || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: target %+v", p.Title, tg)
			}
			refs[tg.RefID] = true
			exprs = append(exprs, tg.Expr)
		}
	}
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	suffix := regexp.MustCompile(`_(bucket|sum|count)$`)
	for _, name := range regexp.MustCompile(`mcp_proxy_[a-z_]+`).FindAllString(strings.Join(exprs, "\n"), -1) {
		base := suffix.ReplaceAllString(name, "")
		if !strings.Contains(string(ops), "| `"+base+"` |") {
			t.Errorf("the dashboard queries %s, which the metrics table of docs/operations.md does not list", name)
		}
	}
}
