// Package dist holds what oxsupervise installs besides its binary (the
// systemd unit, the commented default managed policy, the Debian
// maintainer scripts and the install and package builders) and the tests
// that check them: the default policy against the policy loader's
// built-in defaults, and the package built by `make deb` installed into a
// scratch root. It has no Go API.
package dist
