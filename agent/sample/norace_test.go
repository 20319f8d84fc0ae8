//go:build !race

package sample

const raceOn = false
