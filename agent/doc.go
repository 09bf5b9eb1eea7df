// Package agent owns the built-in profiles of the coding agents
// oxsupervise confines (Claude Code, Codex, OpenCode, Aider): what the
// agent process needs and nothing more (DESIGN §8). A Profile is plain
// data, one file per agent, each entry citing the agent's documentation
// or source it was taken from:
//
//   - the model-provider and login hosts the agent reaches (following the
//     agent's own base-URL settings, so gateways and local stand-ins work;
//     a loopback base URL admits exactly its host:port, not all loopback);
//     telemetry and update hosts are not listed, and the agent's own
//     switches for non-essential traffic are set;
//   - the provider credentials it reads from the environment, passed
//     through the environment scrub;
//   - the state it writes outside the workspace, writable (created, owned
//     by the user, before the session when missing, so that the kernel
//     rule has an inode to name);
//   - its rule files (settings with hooks, instruction files, plugins, MCP
//     definitions), read-only;
//   - the documented switch that tells the agent it is already sandboxed,
//     since its own sandbox (bubblewrap, Landlock) cannot start inside a
//     session.
//
// Detect picks the profile from the command line; package policy applies
// it as a layer above the user's files and below the managed locks
// (policy/agentprofile.go). The command tier of a profile (issue 17: what
// the commands the agent runs get) is a later addition to Profile.
//
// # Files that hold both state and rules
//
// Claude Code keeps session state and MCP server definitions in one file,
// ~/.claude.json. It stays writable (Claude Code writes it in place when
// it cannot create its temporary file beside it, so the home directory
// itself stays read-only), and Guard snapshots the keys that start
// programs outside the boundary (mcpServers, each project's mcpServers)
// before the session and puts them back after it, reporting every key it
// rolled back so the caller can audit it.
package agent
