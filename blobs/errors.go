package blobs

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these; compare with errors.Is.
var (
	// ErrInvalidOptions: New was given a mode it does not know or an unusable Dir.
	ErrInvalidOptions = errors.New("invalid blob options")
	// ErrInvalidAgent: the agent name does not match [A-Za-z0-9_-]{1,32}, so it cannot name a
	// directory under Dir.
	ErrInvalidAgent = errors.New("invalid agent name for blob storage")
	// ErrMalformedResult: the tools/call result given to Rewrite is not valid JSON.
	ErrMalformedResult = errors.New("malformed tools/call result")

	// The following are causes found in Outcome.Err; Rewrite itself does not fail with them.

	// ErrTooManyBlobs: the result holds more blob items than MaxBlobsPerResult.
	ErrTooManyBlobs = errors.New("too many blobs in one result")
	// ErrOverBudget: the estimated decoded total of the result is over MaxBytesPerResult.
	ErrOverBudget = errors.New("blobs of one result over the size budget")
	// ErrTooLarge: one blob decodes to more than MaxBytesPerBlob.
	ErrTooLarge = errors.New("blob too large")
	// ErrInvalidBase64: the blob is not standard (padded) base64.
	ErrInvalidBase64 = errors.New("invalid base64")
	// ErrSymlink: Dir, the agent directory or the target file is a symbolic link (or was
	// swapped for something else while it was being opened).
	ErrSymlink = errors.New("symbolic link refused")
	// ErrNotRegular: a path that must be a directory or a regular file is something else.
	ErrNotRegular = errors.New("unexpected file type")
	// ErrStoreFull: the agent folder cannot take the blob within Options.MaxStoreBytes, even
	// after evicting every older file.
	ErrStoreFull = errors.New("blob store full")
)
