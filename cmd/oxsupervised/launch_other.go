//go:build !linux

package main

// nameProcess: the daemon is Linux only (daemon.Main says so).
func nameProcess() {}
