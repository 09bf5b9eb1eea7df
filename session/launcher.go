package session

import "github.com/openoxide/oxsupervise/launcher"

// LaunchSpec is the launcher's input (package launcher), which Run and
// Nested.Spec fill.
type LaunchSpec = launcher.Spec

// LauncherVerb is the hidden first argument that turns a binary into the
// launcher: the supervisor re-executed when no launcher program is
// installed beside it, or a test binary given as RunOptions.SelfExe.
const LauncherVerb = launcher.Verb

// LauncherMain is the launcher, for a binary started with LauncherVerb.
func LauncherMain() int { return launcher.Main() }
