package upstream

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// capabilitiesOf reads the tasks capability of MCP 2025-11-25 as the
// server declares it, part by part; the 2026-07-28 tasks extension (under
// extensions) is not this capability.
func TestCapabilitiesOfTasks(t *testing.T) {
	for _, tc := range []struct {
		name, caps string
		want       TaskCapabilities
	}{
		{"none", `{"tools":{}}`, TaskCapabilities{}},
		{"all", `{"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`, TaskCapabilities{ToolCalls: true, List: true, Cancel: true}},
		{"calls only", `{"tasks":{"requests":{"tools":{"call":{}}}}}`, TaskCapabilities{ToolCalls: true}},
		{"requests without tools/call", `{"tasks":{"list":{},"requests":{"tools":{}}}}`, TaskCapabilities{List: true}},
		{"empty", `{"tasks":{}}`, TaskCapabilities{}},
		{"the 2026-07-28 extension", `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, TaskCapabilities{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c mcp.ServerCapabilities
			if err := json.Unmarshal([]byte(tc.caps), &c); err != nil {
				t.Fatal(err)
			}
			got := capabilitiesOf(c).Tasks
			if got != tc.want {
				t.Errorf("Tasks = %+v, want %+v", got, tc.want)
			}
			if got.Any() != (tc.want != TaskCapabilities{}) {
				t.Errorf("Any() = %v", got.Any())
			}
		})
	}
}
