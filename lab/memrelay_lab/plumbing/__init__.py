"""What the lab, `make bench` (scripts/bench_*.py) and their tests share to start programs: how
the proxies memrelay is compared with are configured and started (`peers`), where their binaries
are (`binaries`: memcached's proxy built into a cache outside the repository), and processes and
their ports (`processes`).

Standard library only, and it imports nothing else of the lab: the bench's scripts use it as
they are. Import its modules by name (``memrelay_lab.plumbing.peers``).
"""
