package upstream

import (
	"errors"
	"testing"
)

// TestSnapshotStatus: the word every view shows; a retry after a failure
// reads failed.
func TestSnapshotStatus(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		snap Snapshot
		want string
	}{
		{Snapshot{State: StateConnecting}, "connecting"},
		{Snapshot{State: StateConnecting, Err: boom, Attempt: 3}, "failed"},
		{Snapshot{State: StateFailed, Err: boom}, "failed"},
		{Snapshot{State: StateConnected}, "connected"},
		{Snapshot{State: StateParked, Err: boom}, "parked"},
		{Snapshot{State: StateNeedsAuth, Err: boom}, "needs_auth"},
		{Snapshot{State: StateClosed}, "closed"},
	}
	for _, tt := range tests {
		if got := tt.snap.Status(); got != tt.want {
			t.Errorf("%s with error %v: Status() = %q, want %q", tt.snap.State, tt.snap.Err, got, tt.want)
		}
	}
}
