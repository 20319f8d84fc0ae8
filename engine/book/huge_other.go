//go:build !linux

package book

import "unsafe"

func adviseHuge(unsafe.Pointer, uintptr) {}
