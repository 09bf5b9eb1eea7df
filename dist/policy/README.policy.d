Managed policy fragments of oxsupervise.

Every *.toml file here is read after /etc/oxsupervise/policy.toml, in
lexical order (for example 10-network.toml, 20-agents.toml); a later file
overrides an earlier one, and locks ([managed] locked = [...]) in any of
them bind every user and workspace file. Other files, such as this one,
are ignored. Check the result with `oxsupervise policy show`.
