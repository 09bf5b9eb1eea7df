// Package objversion is the one definition of the digest that names a
// build's BPF objects (loader.ObjectsVersion): `make generate` writes it
// into package loader as a constant (./gen), so no start of a supervisor
// hashes the objects it embeds, and loader's test checks the constant
// against those objects.
package objversion

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Digest is the first 16 hex digits of the SHA-256 of each object's
// length (8 bytes, little-endian) followed by the object, in order.
func Digest(objects ...[]byte) string {
	h := sha256.New()
	for _, b := range objects {
		binary.Write(h, binary.LittleEndian, uint64(len(b)))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
