"""Jobs that compose kb, agents and ci: propose, review loop, merge, index rebuild."""
