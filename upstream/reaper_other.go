//go:build !linux

package upstream

import (
	"time"

	"github.com/rs/zerolog"
)

// Reaper does nothing on this system: only Linux lets a process adopt its
// orphaned descendants. Stdio servers are still ended with their process
// group at shutdown.
type Reaper struct{}

// StartReaper returns a Reaper that does nothing.
func StartReaper(zerolog.Logger) (*Reaper, error) { return &Reaper{}, nil }

// Close does nothing.
func (r *Reaper) Close(time.Duration) {}
