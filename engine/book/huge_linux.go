package book

import (
	"syscall"
	"unsafe"
)

// hugeMinBytes is the size from which an array is worth transparent huge pages.
const hugeMinBytes = 4 << 20

// adviseHuge asks the kernel to back a large, freshly allocated array with transparent huge
// pages (effective when THP is in "madvise" mode, the common default). The big arrays of a
// book (id index, restore arena) are touched at random or all at once; with 4 KiB pages that
// costs a page fault per 4 KiB on first touch and a TLB miss per access. Advice only: errors
// are ignored and nothing changes if THP is off.
func adviseHuge(p unsafe.Pointer, bytes uintptr) {
	if bytes < hugeMinBytes {
		return
	}
	_ = syscall.Madvise(unsafe.Slice((*byte)(p), bytes), 14 /* MADV_HUGEPAGE */)
}
