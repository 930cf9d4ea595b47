// Package sanitize cleans text that crosses a trust boundary before it is
// shown to a host or written to a log.
//
// Three kinds of text pass through it:
//
//   - error texts sent downstream and every log line ([Text], [Error]): URL
//     query strings are dropped, well-known secret shapes are replaced with
//     [Redacted], control characters are removed;
//   - text from upstream servers that reaches a model ([StripTags]): Unicode
//     TAG characters, which are invisible and can smuggle instructions, are
//     removed;
//   - log output of the whole process ([Scrubber]): the exact secret values of
//     the configuration (environment values, header values, tokens) are
//     replaced wherever they appear, in raw, URL-encoded and JSON-escaped form.
//
// All functions are safe for concurrent use and never panic on any input.
package sanitize
