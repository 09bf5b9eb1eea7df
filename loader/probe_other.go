//go:build !linux

package loader

func probeBPFLSM() error                 { return ErrUnsupportedOS }
func probeCgroupSockAddr(_ string) error { return ErrUnsupportedOS }
func probeBTF() error                    { return ErrUnsupportedOS }
func activeLSMs() ([]string, error)      { return nil, ErrUnsupportedOS }
