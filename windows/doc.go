// Package windows is the Windows backend: it plans and builds a session
// boundary from a policy.Compiled out of a Job object (kill on close,
// process limit, UI restrictions), a write-restricted token whose
// restricting SID is unique to the session, and ACEs that grant that SID
// write access on writable roots and deny it on protected entries. Every
// ACE change is journalled before it is made so that a crashed supervisor's
// changes are undone at the next start.
//
// Planning (Plan, the SID derivation, the ACE list, the degraded-mode
// decisions, the journal) is pure Go, builds everywhere and is tested on
// Linux; only the code that calls Windows APIs has a windows build tag.
package windows
