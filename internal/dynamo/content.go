package dynamo

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"

	"github.com/outflowhq/outflow/internal/outbox"
)

// contentDigestPrefix names the digest's form, so that another one can
// be told from it.
const contentDigestPrefix = "sha256:"

// ContentDigest is what a tombstone keeps of a row's payload and
// attributes once its settle has dropped them: "sha256:" and the
// lower-case hexadecimal SHA-256 of the payload, then of each attribute
// but the trace context (outbox.AttrTraceParent), in ascending byte order
// of its name, its name and its value, each of these byte strings
// preceded by its length as an unsigned 64-bit big-endian integer. The
// queue, group and delay, which SameContent also compares, stay in the
// tombstone as they were staged.
func ContentDigest(row outbox.Row) string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(row.Payload)
	attrs := content(row.Attributes)
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		field([]byte(name))
		field([]byte(attrs[name]))
	}
	return contentDigestPrefix + hex.EncodeToString(h.Sum(nil))
}

// SameContent reports whether two rows carry what a producer chose alike:
// queue, payload, attributes, group and delay. Delivery state is ignored.
// A tombstone, whose payload and attributes its settle dropped, is
// compared by its ContentDigest.
func SameContent(a, b outbox.Row) bool {
	if a.Queue != b.Queue || a.Group != b.Group || a.NotBefore.UnixMilli() != b.NotBefore.UnixMilli() {
		return false
	}
	if dropped(a) || dropped(b) {
		return digestOf(a) == digestOf(b)
	}
	return bytes.Equal(a.Payload, b.Payload) && maps.Equal(content(a.Attributes), content(b.Attributes))
}

// dropped reports whether row is a tombstone whose payload and
// attributes were dropped, leaving their digest.
func dropped(row outbox.Row) bool {
	return row.ContentDigest != "" && row.Payload == nil && row.Attributes == nil
}

// digestOf is the digest a row's payload and attributes have: the one
// stored, for a tombstone, else the one they make.
func digestOf(row outbox.Row) string {
	if dropped(row) {
		return row.ContentDigest
	}
	return ContentDigest(row)
}

// content is a row's attributes without its trace context: a retry staged
// from another request carries another traceparent, and is the same row.
func content(attrs map[string]string) map[string]string {
	if _, ok := attrs[outbox.AttrTraceParent]; !ok {
		return attrs
	}
	out := maps.Clone(attrs)
	delete(out, outbox.AttrTraceParent)
	return out
}
