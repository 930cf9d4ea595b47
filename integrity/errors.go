package integrity

import "errors"

// Sentinel errors. Compare with errors.Is.
var (
	// ErrBadDefinition is a tool object that cannot be fingerprinted (not a
	// JSON object).
	ErrBadDefinition = errors.New("integrity: bad tool definition")
	// ErrCorruptPins is a pin file that cannot be read or does not hold what
	// mcp-proxy writes. The error text names the file. A proxy never
	// re-pins over such a file: the operator repairs or deletes it.
	ErrCorruptPins = errors.New("pin file is unreadable or corrupt")
	// ErrLocked is a pin file whose lock another process held for longer
	// than lockWait.
	ErrLocked = errors.New("pin file is locked by another process")
	// ErrNoStateDir is a server that pins while no state_dir is configured.
	ErrNoStateDir = errors.New("no state_dir for the tool pins")
	// ErrNothingPending is an approval of a tool that has no pending
	// definition.
	ErrNothingPending = errors.New("nothing to approve")
	// ErrPendingChanged is an approval of a reviewed definition that is no
	// longer the one pending: the upstream changed the tool again since.
	ErrPendingChanged = errors.New("the pending definition changed since it was reviewed")
)
