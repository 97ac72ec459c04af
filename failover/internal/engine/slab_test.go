package engine

import (
	"testing"
	"unsafe"
)

// TestRowSlabFillsItsAllocation keeps a slab of rowSlabSize Row values
// at 1,536 bytes and one of rows values at 10,240: both are size classes
// of the Go runtime, allocated without a byte to spare. A field that
// pushed either into the next class would be paid by every query in
// garbage to collect (about 1% of a QueryRow's client CPU per 160 bytes,
// BenchmarkGarbageCPU).
func TestRowSlabFillsItsAllocation(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the sizes held here are those of a 64-bit platform")
	}
	if got, want := unsafe.Sizeof(sentRow{})*rowSlabSize, uintptr(1536); got != want {
		t.Errorf("a slab of Row values is %d bytes, want %d: a sentRow is %d bytes", got, want, unsafe.Sizeof(sentRow{}))
	}
	if got, want := unsafe.Sizeof(rows{})*rowSlabSize, uintptr(10240); got != want {
		t.Errorf("a slab of rows values is %d bytes, want %d: a rows is %d bytes (the call in it %d)", got, want, unsafe.Sizeof(rows{}), unsafe.Sizeof(call{}))
	}
}
