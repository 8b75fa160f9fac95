"""A review step written as a Python function (docs/python-steps.md).

The step reads each file, asks the reviewer agent about it (the fake provider: offline) and
writes a report. Everything it does outside its own code goes through ``ctx``, so each read,
model request and write is an effect of the task: after a crash or a park the function runs
again from the top, and what was confirmed answers from the journal instead of being done
twice. Try it:

    agentctl roll workflows/python/review_step.py --workspace /tmp/review
"""

from agentctl.spec.python_api import WorkflowBuilder

workflow = (
    WorkflowBuilder("review-step", description="Review files with a Python step.")
    .input("files", ["review_pipeline.yaml"])
    .output("report", "${{ tasks.review.output.report }}")
    .provider("scripted", "fake")
    .agent(
        "reviewer",
        provider="scripted",
        model="scripted",
        instructions="Review the file you are given in one sentence.",
        max_turns=1,
    )
    .policy(approval="never", writable_roots=["out"])
)


@workflow.step(
    with_={"files": "${{ inputs.files }}"},
    timeout="2m",
    output_schema={
        "type": "object",
        "properties": {"reviewed": {"type": "integer"}, "report": {"type": "string"}},
        "required": ["reviewed", "report"],
    },
)
def review(ctx, inputs):
    sections = []
    for name in inputs["files"]:
        text = ctx.read(name)
        answer = ctx.model("reviewer", f"Review {name} ({len(text.splitlines())} lines).")
        sections.append(f"## {name}\n\n{answer['text']}\n")
    ctx.write("out/review.md", "# Review\n\n" + "\n".join(sections))
    return {"reviewed": len(sections), "report": "out/review.md"}
