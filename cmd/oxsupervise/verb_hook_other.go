//go:build !linux

package main

// hookInSession: nested sessions exist on Linux only.
func hookInSession() bool { return false }
