"""The function of the model test's fn.yaml (a python.function step)."""


def mark(ctx, inputs):
    done = ctx.shell(
        "sh",
        [
            "-c",
            'n=$(cat /proc/sys/kernel/random/uuid); echo "$n fn.mark $PPID" >> ledger.txt; echo $n',
        ],
    )
    marker = done["stdout"].strip()
    ctx.write(f"out/fn-{inputs['tag']}.txt", marker)
    return {"stdout": marker}
