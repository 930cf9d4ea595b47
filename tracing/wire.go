package tracing

import (
	"math"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The OTLP protobuf encoding of spans, written straight from the
// recorder's ended spans (span.go). It produces the bytes the OTLP exporters' own conversion
// and proto.Marshal produce (TestWireMatchesSDK compares them): the same
// fields in field-number order, zero scalars left out, a span's status and
// an attribute's value always written. One difference: text that is not
// UTF-8 is made so (appendUTF8), where the SDK's exporter fails the batch
// (TestWireValidUTF8).
//
// Field numbers of opentelemetry/proto/trace/v1/trace.proto and
// common/v1/common.proto.
const (
	fSpanTraceID      protowire.Number = 1
	fSpanSpanID       protowire.Number = 2
	fSpanTraceState   protowire.Number = 3
	fSpanParentSpanID protowire.Number = 4
	fSpanName         protowire.Number = 5
	fSpanKind         protowire.Number = 6
	fSpanStart        protowire.Number = 7
	fSpanEnd          protowire.Number = 8
	fSpanAttributes   protowire.Number = 9
	fSpanDroppedAttrs protowire.Number = 10
	fSpanEvents       protowire.Number = 11
	fSpanDroppedEvts  protowire.Number = 12
	fSpanLinks        protowire.Number = 13
	fSpanDroppedLinks protowire.Number = 14
	fSpanStatus       protowire.Number = 15
	fSpanFlags        protowire.Number = 16

	fStatusMessage protowire.Number = 2
	fStatusCode    protowire.Number = 3

	fEventTime         protowire.Number = 1
	fEventName         protowire.Number = 2
	fEventAttributes   protowire.Number = 3
	fEventDroppedAttrs protowire.Number = 4

	fLinkTraceID      protowire.Number = 1
	fLinkSpanID       protowire.Number = 2
	fLinkAttributes   protowire.Number = 4
	fLinkDroppedAttrs protowire.Number = 5
	fLinkFlags        protowire.Number = 6

	fKVKey   protowire.Number = 1
	fKVValue protowire.Number = 2

	fAnyString protowire.Number = 1
	fAnyBool   protowire.Number = 2
	fAnyInt    protowire.Number = 3
	fAnyDouble protowire.Number = 4
	fAnyArray  protowire.Number = 5
	fAnyKVList protowire.Number = 6
	fAnyBytes  protowire.Number = 7

	fListValues protowire.Number = 1 // ArrayValue.values, KeyValueList.values

	fResourceAttributes protowire.Number = 1

	fScopeName       protowire.Number = 1
	fScopeVersion    protowire.Number = 2
	fScopeAttributes protowire.Number = 3
)

// OTLP's span flags: the low 8 bits are the W3C trace flags, then whether
// the parent's remoteness is known, and whether it is remote.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// OTLP enum values.
const (
	statusOK    = 1
	statusError = 2

	kindInternal = 1
	kindServer   = 2
	kindClient   = 3
	kindProducer = 4
	kindConsumer = 5
)

// beginMsg appends the tag of an embedded message and one byte for its
// length, which endMsg fills; it returns where the message starts.
func beginMsg(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

// endMsg writes the length of the message begun at start, moving the
// message up when the length needs more than the one byte reserved.
func endMsg(b []byte, start int) []byte {
	n := len(b) - start
	if n < 0x80 {
		b[start-1] = byte(n)
		return b
	}
	extra := protowire.SizeVarint(uint64(n)) - 1
	b = append(b, make([]byte, extra)...)
	copy(b[start+extra:], b[start:start+n])
	protowire.AppendVarint(b[start-1:start-1], uint64(n))
	return b
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return appendUTF8(b, s)
}

// appendUTF8 appends s as the bytes of a protobuf string, each run of
// invalid UTF-8 in it replaced by U+FFFD. A string field must hold UTF-8:
// a collector's unmarshalling refuses the whole request otherwise, and the
// SDK's exporter fails to marshal it, so that one span's text from an
// upstream (an error message, a name) would cost every span of its batch.
func appendUTF8(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return protowire.AppendString(b, s)
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64Field(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendFixed32Field(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

// count is an SDK count as OTLP's uint32, clamped.
func count(v int) uint64 {
	return uint64(min(max(v, 0), math.MaxUint32))
}

// unixNano is t as OTLP's unsigned nanoseconds, 0 before 1970.
func unixNano(ns int64) uint64 { return uint64(max(ns, 0)) }

// appendSpan appends the fields of one Span message (not its tag) of the
// ended span st, its attributes within lim.
func appendSpan(b []byte, st *spanState, lim attrLimits) []byte {
	sc := st.sc
	tid, sid := sc.TraceID(), sc.SpanID()
	b = protowire.AppendTag(b, fSpanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = protowire.AppendTag(b, fSpanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	b = appendStringField(b, fSpanTraceState, sc.TraceState().String())
	if psid := st.parent.SpanID(); psid.IsValid() {
		b = appendBytesField(b, fSpanParentSpanID, psid[:])
	}
	b = appendStringField(b, fSpanName, st.name)
	b = appendVarintField(b, fSpanKind, spanKind(st.kind))
	b = appendFixed64Field(b, fSpanStart, unixNano(st.start.UnixNano()))
	b = appendFixed64Field(b, fSpanEnd, unixNano(st.end.UnixNano()))
	kept, dropped := 0, st.dropped
	st.attributes(func(kv attribute.KeyValue) {
		if lim.count >= 0 && kept >= lim.count {
			dropped++
			return
		}
		kept++
		b = appendKeyValue(b, fSpanAttributes, truncated(kv, lim.valueLen))
	})
	b = appendVarintField(b, fSpanDroppedAttrs, count(dropped))
	var at int
	b, at = beginMsg(b, fSpanStatus)
	var code uint64
	switch st.status {
	case codes.Ok:
		code = statusOK
	case codes.Error:
		code = statusError
	}
	b = appendStringField(b, fStatusMessage, st.statusText)
	b = appendVarintField(b, fStatusCode, code)
	b = endMsg(b, at)
	return appendFixed32Field(b, fSpanFlags, spanFlags(sc.TraceFlags(), st.parent))
}

// truncated is kv with its string, or each string of its list, cut to at
// most limit characters, as the SDK cuts them (limit < 0: no limit).
func truncated(kv attribute.KeyValue, limit int) attribute.KeyValue {
	if limit < 0 {
		return kv
	}
	switch kv.Value.Type() {
	case attribute.STRING:
		if s := kv.Value.AsString(); len(s) > limit {
			kv.Value = attribute.StringValue(cutChars(s, limit))
		}
	case attribute.STRINGSLICE:
		ss := kv.Value.AsStringSlice()
		for i, s := range ss {
			ss[i] = cutChars(s, limit)
		}
		kv.Value = attribute.StringSliceValue(ss)
	}
	return kv
}

// cutChars is s cut after its first limit characters (runes; a byte that
// is not UTF-8 counts as one).
func cutChars(s string, limit int) string {
	n := 0
	for i := range s {
		if n == limit {
			return s[:i]
		}
		n++
	}
	return s
}

// spanFlags are OTLP's flags of a span (or link) with trace flags tf
// whose parent (or linked span) is parent.
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

func spanKind(k trace.SpanKind) uint64 {
	switch k {
	case trace.SpanKindInternal:
		return kindInternal
	case trace.SpanKindServer:
		return kindServer
	case trace.SpanKindClient:
		return kindClient
	case trace.SpanKindProducer:
		return kindProducer
	case trace.SpanKindConsumer:
		return kindConsumer
	}
	return 0
}

// appendKeyValues appends each attribute as a KeyValue field num.
func appendKeyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendKeyValue(b, num, kv)
	}
	return b
}

func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, at := beginMsg(b, num)
	b = appendStringField(b, fKVKey, string(kv.Key))
	b = appendValue(b, fKVValue, kv.Value)
	return endMsg(b, at)
}

// appendValue appends v as an AnyValue field num, as the exporters do: an
// empty value is an empty AnyValue, an unknown type the string "INVALID".
func appendValue(b []byte, num protowire.Number, v attribute.Value) []byte {
	b, at := beginMsg(b, num)
	switch v.Type() {
	case attribute.EMPTY:
	case attribute.BOOL:
		b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = appendDouble(b, v.AsFloat64())
	case attribute.STRING:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		b = appendUTF8(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, fAnyBytes, protowire.BytesType)
		b = protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		b = appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		b = appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		b = appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		b = appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		b = appendArray(b, v.AsSlice(), func(e attribute.Value) attribute.Value { return e })
	case attribute.MAP:
		var list int
		b, list = beginMsg(b, fAnyKVList)
		b = appendKeyValues(b, fListValues, v.AsMap())
		b = endMsg(b, list)
	default:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		b = protowire.AppendString(b, "INVALID")
	}
	return endMsg(b, at)
}

func appendDouble(b []byte, f float64) []byte {
	b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(f))
}

// appendIterKeyValues appends the attributes of a set (a resource's, a
// scope's) as KeyValue fields num.
func appendIterKeyValues(b []byte, num protowire.Number, it attribute.Iterator) []byte {
	for it.Next() {
		b = appendKeyValue(b, num, it.Attribute())
	}
	return b
}

// appendArray appends the AnyValue field array_value: an ArrayValue whose
// values are the elements of s, each made a Value by value.
func appendArray[T any](b []byte, s []T, value func(T) attribute.Value) []byte {
	b, arr := beginMsg(b, fAnyArray)
	for _, e := range s {
		b = appendValue(b, fListValues, value(e))
	}
	return endMsg(b, arr)
}
