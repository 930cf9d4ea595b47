package upstream

import (
	"testing"
	"time"
)

func TestJitteredBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		n        int
		r        float64
		want     time.Duration
		wantBase time.Duration
	}{
		{"first, no jitter", 1, 0.5, time.Second, time.Second},
		{"first, lowest", 1, 0, 800 * time.Millisecond, time.Second},
		{"first, near highest", 1, 0.999999, 1200 * time.Millisecond, time.Second},
		{"second", 2, 0.5, 2 * time.Second, 2 * time.Second},
		{"third", 3, 0.5, 4 * time.Second, 4 * time.Second},
		{"fourth", 4, 0.5, 8 * time.Second, 8 * time.Second},
		{"fifth", 5, 0.5, 16 * time.Second, 16 * time.Second},
		{"fifth, lowest", 5, 0, 12800 * time.Millisecond, 16 * time.Second},
		{"sixth", 6, 0.5, 32 * time.Second, 32 * time.Second},
		{"seventh is capped", 7, 0.5, 60 * time.Second, 60 * time.Second},
		{"capped, lowest", 7, 0, 48 * time.Second, 60 * time.Second},
		{"capped, highest stays at the cap", 7, 0.999999, 60 * time.Second, 60 * time.Second},
		{"huge attempt does not overflow", 1 << 20, 0.5, 60 * time.Second, 60 * time.Second},
		{"attempt 0 counts as 1", 0, 0.5, time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := jitteredBackoff(tc.n, tc.r)
			if d := got - tc.want; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("jitteredBackoff(%d, %v) = %s, want %s", tc.n, tc.r, got, tc.want)
			}
		})
	}
}

func TestSpecBackoffJitterBounds(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 10; n++ {
		base := min(time.Second<<(n-1), backoffCap)
		lo, hi := time.Duration(float64(base)*0.8), min(time.Duration(float64(base)*1.2), backoffCap)
		var below, above bool // both halves of the range are drawn
		for range 2000 {
			d := specBackoff(n)
			if d < lo || d > hi {
				t.Fatalf("attempt %d: wait %s outside [%s, %s]", n, d, lo, hi)
			}
			below = below || d < base
			above = above || d > base
		}
		if !below || (!above && base < backoffCap) {
			t.Errorf("attempt %d: jitter never went below (%v) or above (%v) %s", n, below, above, base)
		}
	}
}

func TestScheduleAttemptsAndPark(t *testing.T) {
	t.Parallel()
	var asked []int
	s := scheduleOf(Options{Backoff: func(n int) time.Duration {
		asked = append(asked, n)
		return time.Duration(n) * time.Millisecond
	}, ProbeInterval: 7 * time.Second})
	for failed := 0; failed < reconnectAttempts; failed++ {
		wait, parked := s.after(failed)
		if parked || wait != time.Duration(failed+1)*time.Millisecond {
			t.Errorf("after failure %d: wait %s parked %v, want %dms and not parked", failed, wait, parked, failed+1)
		}
	}
	for _, failed := range []int{reconnectAttempts, reconnectAttempts + 1, 100} {
		if wait, parked := s.after(failed); !parked || wait != 7*time.Second {
			t.Errorf("after failure %d: wait %s parked %v, want the probe interval, parked", failed, wait, parked)
		}
	}
	if want := []int{1, 2, 3, 4, 5}; len(asked) != len(want) {
		t.Fatalf("Backoff asked for %v, want %v", asked, want)
	} else {
		for i := range want {
			if asked[i] != want[i] {
				t.Fatalf("Backoff asked for %v, want %v", asked, want)
			}
		}
	}

	// Defaults: the documented schedule and a 300 s probe; a negative wait is 0.
	def := scheduleOf(Options{})
	if wait, parked := def.after(0); parked || wait < 800*time.Millisecond || wait > 1200*time.Millisecond {
		t.Errorf("default first wait %s (parked %v), want 1s ±20%%", wait, parked)
	}
	if wait, parked := def.after(4); parked || wait < 12800*time.Millisecond || wait > 19200*time.Millisecond {
		t.Errorf("default fifth wait %s (parked %v), want 16s ±20%%", wait, parked)
	}
	if wait, parked := def.after(5); !parked || wait != 300*time.Second {
		t.Errorf("default after 5 failed attempts: wait %s parked %v, want 300s parked", wait, parked)
	}
	neg := scheduleOf(Options{Backoff: func(int) time.Duration { return -time.Second }, ProbeInterval: -1})
	if wait, _ := neg.after(0); wait != 0 {
		t.Errorf("negative backoff gives %s, want 0", wait)
	}
	if wait, _ := neg.after(5); wait != defaultProbeInterval {
		t.Errorf("negative probe interval gives %s, want the default", wait)
	}
}
