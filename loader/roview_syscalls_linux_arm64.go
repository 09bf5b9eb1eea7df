package loader

// roviewCalls: arm64 has only the *at family.
var roviewCalls = roviewAtCalls
