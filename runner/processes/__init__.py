"""The runner's own processes: the fork server that starts proxies and built-in upstreams warm
(forkserver.py), the command that stands for each forked process (forkclient.py), and the
temporary folders named after the process that made them (workdirs.py)."""
