package downstream

import (
	"encoding/json"
	"io"
)

// reply is one message to a client as the pieces it is written from. A
// response whose value is at least pieceMin bytes keeps that value as a
// piece of its own (body) between its envelope's head and tail: a large
// value is often shared (every tools/list of a view answers with the
// view's one result), and this way it is written out as it is instead of
// being copied into a new envelope for every response. Any other message
// is whole in head.
type reply struct {
	head, body, tail []byte
}

// pieceMin is the size from which a value is not copied into its
// envelope, and a whole message is written without being copied to add
// what frames it (a second write costs less than the copy).
const pieceMin = 64 << 10

// whole is the reply of a message that is in one slice already.
func whole(msg []byte) reply { return reply{head: msg} }

// response builds a JSON-RPC response: member is "result" or "error",
// value its JSON, which is never modified.
func response(id json.RawMessage, member string, value []byte) reply {
	const pre = `{"jsonrpc":"2.0","id":`
	size := len(pre) + len(id) + len(member) + 4 + len(envelopeTail)
	if len(value) < pieceMin {
		size += len(value)
	}
	msg := make([]byte, 0, size)
	msg = append(append(append(append(append(msg, pre...), id...), `,"`...), member...), `":`...)
	if len(value) >= pieceMin {
		return reply{head: msg, body: value, tail: envelopeTail}
	}
	return whole(append(append(msg, value...), envelopeTail...))
}

// envelopeTail closes a response after its value. Never modified.
var envelopeTail = []byte(`}`)

// size is the length of the message.
func (r reply) size() int { return len(r.head) + len(r.body) + len(r.tail) }

// bytes returns the message in one slice: head itself when whole, else a
// copy of the pieces.
func (r reply) bytes() []byte {
	if r.body == nil && r.tail == nil {
		return r.head
	}
	out := make([]byte, 0, r.size())
	return append(append(append(out, r.head...), r.body...), r.tail...)
}

// write writes the message to w between pre and post (the transport's
// framing): a whole message smaller than pieceMin with its framing in one
// write, else in a few, none of which copies a large piece.
func (r reply) write(w io.Writer, pre, post string) error {
	if r.body == nil && r.tail == nil && len(r.head) < pieceMin && pre+post != "" {
		buf := make([]byte, 0, len(pre)+len(r.head)+len(post))
		_, err := w.Write(append(append(append(buf, pre...), r.head...), post...))
		return err
	}
	parts := [3][]byte{r.head, r.body, r.tail}
	if r.body != nil {
		// head and tail are the envelope's few bytes: framing joins them.
		parts = [3][]byte{join(pre, r.head), r.body, append(r.tail[:len(r.tail):len(r.tail)], post...)}
		pre, post = "", ""
	}
	if pre != "" {
		if _, err := io.WriteString(w, pre); err != nil {
			return err
		}
	}
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	if post != "" {
		_, err := io.WriteString(w, post)
		return err
	}
	return nil
}

// join is pre followed by b, in a new slice.
func join(pre string, b []byte) []byte {
	return append(append(make([]byte, 0, len(pre)+len(b)), pre...), b...)
}

// replyArray is the JSON array of replies (a batch's answer), made in one
// allocation.
func replyArray(replies []reply) []byte {
	n := 2
	for _, r := range replies {
		n += r.size() + 1
	}
	out := append(make([]byte, 0, n), '[')
	for i, r := range replies {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, r.head...), r.body...), r.tail...)
	}
	return append(out, ']')
}
