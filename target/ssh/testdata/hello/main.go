// Command hello is the smallest program to cross-build in stage's tests.
package main

func main() {}
