package failover

import (
	"testing"
	"unsafe"
)

// TestRowSlabFillsItsAllocation keeps a row and a rows at 160 bytes, so
// that a slab of rowSlabSize of them is 10,240 bytes: one of the Go
// runtime's size classes, allocated without a byte to spare. At 168 bytes
// the slab would take the next class, 12,288 bytes, which every query
// would pay for in garbage to collect (about 1% of a QueryRow's client CPU
// per 160 bytes, BenchmarkGarbageCPU).
func TestRowSlabFillsItsAllocation(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the sizes held here are those of a 64-bit platform")
	}
	const slabBytes = 10240
	if got := unsafe.Sizeof(row{}) * rowSlabSize; got != slabBytes {
		t.Errorf("a slab of rows is %d bytes, want %d: a row is %d bytes (the call in it %d)", got, slabBytes, unsafe.Sizeof(row{}), unsafe.Sizeof(call{}))
	}
	if got := unsafe.Sizeof(rows{}) * rowSlabSize; got != slabBytes {
		t.Errorf("a slab of rows values is %d bytes, want %d: a rows is %d bytes", got, slabBytes, unsafe.Sizeof(rows{}))
	}
}
