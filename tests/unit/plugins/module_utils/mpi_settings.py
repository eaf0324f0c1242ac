# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``mpi`` settings of fabric_verify as its defaults give them, for the tests that build MPIJobs."""

MPI = {
    "run_as_user": 1000,
    "ssh_auth_mount_path": "/home/mpiuser/.ssh",
    "worker_command": ["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"],
    "launcher_affinity": {},
    "backoff_limit": 0,
}
