# For tests/workflow/test_slurm.py, run with the slurm profile: two jobs the test interrupts on
# the cluster. Each first creates <name>.started, then waits (up to 10 minutes) until the test
# has acted, and writes the attempt it finished on.
#   timeout: the test cuts its time limit (TIMEOUT); Snakemake's retry resubmits it.
#   preempt: the test requeues it (as a preemption does); SLURM restarts it, same attempt.


rule all:
    input:
        "timeout.txt",
        "preempt.txt",


rule timeout:
    output:
        "timeout.txt",
    resources:
        attempt_no=lambda wildcards, attempt: attempt,
    shell:
        "if [ {resources.attempt_no} -eq 1 ]; then touch timeout.started; sleep 600; fi;"
        " echo attempt {resources.attempt_no} > {output}"


rule preempt:
    output:
        "preempt.txt",
    resources:
        attempt_no=lambda wildcards, attempt: attempt,
    shell:
        "if [ ! -e preempt.started ]; then touch preempt.started; sleep 600; fi;"
        " echo attempt {resources.attempt_no} > {output}"
