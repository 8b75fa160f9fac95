"""The review pipeline defined in Python; review_pipeline.yaml is its YAML twin.

Load it like any workflow: ``agentctl check workflows/python/review_pipeline.py``.
Loading runs this file, which defines the module-level ``workflow``.
"""

from agentctl.spec.python_api import WorkflowBuilder, case, foreach, loop, route, task

READ_FILE_OUTPUT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "bytes": {"type": "integer"},
        "sha256": {"type": "string"},
    },
    "required": ["path", "content", "bytes", "sha256"],
}

REVIEW_SCHEMA = {
    "type": "object",
    "properties": {
        "severity": {"type": "string", "enum": ["low", "high"]},
        "note": {"type": "string"},
    },
    "required": ["severity", "note"],
    "additionalProperties": False,
}

workflow = (
    WorkflowBuilder(
        "review-pipeline",
        description="Review files with a scripted model, route on a channel, refine and summarise.",
        labels={"team": "platform"},
    )
    .input("channel", "strict")
    .output("summary", "${{ tasks.summary.output.text }}")
    .provider("scripted", "fake")
    .policy(workspace_root=".", approval="never")
    .tool(
        "read_file",
        "builtin.workspace.read",
        description="Read one UTF-8 file inside the workspace.",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        output_schema=READ_FILE_OUTPUT,
        capability="filesystem.read",
        risk="low",
        effect_class="observe",
        idempotency="idempotent",
        retry_safe=True,
        timeout_seconds=10,
    )
    .agent(
        "reviewer",
        provider="scripted",
        model="scripted",
        instructions="Read the file with read_file, then rate it.",
        tools=["read_file"],
        max_turns=2,
        max_tool_calls=1,
        structured_output=REVIEW_SCHEMA,
        provider_options={
            "toolInput": {"path": "review_pipeline.yaml"},
            "finalText": '{"severity": "low", "note": "looks fine"}',
        },
    )
    .action("set", "builtin.assign")
    .subworkflow(
        "summarize",
        version="1.0.0",
        inputs={"style": "short"},
        input_schema={
            "type": "object",
            "required": ["reviews", "style"],
            "properties": {"reviews": {"type": "array"}, "style": {"type": "string"}},
        },
        output_schema={
            "type": "object",
            "required": ["text"],
            "properties": {"text": {"type": "string"}},
        },
        outputs={"text": "${{ tasks.compose.output.output.text }}"},
        tasks=[
            task(
                "compose",
                uses="action:set",
                with_={"text": "reviewed in ${{ inputs.style }} style"},
            )
        ],
    )
    .task(
        "review",
        uses="agent:reviewer",
        foreach=foreach(["review_pipeline.yaml", "review_pipeline.py"], as_="file", max_items=4),
        with_={"prompt": "Review ${{ vars.file }}."},
    )
    .task(
        "gate",
        uses="router",
        needs=["review"],
        route=route("${{ inputs.channel }}", case("strict", "polish"), default=["quick"]),
    )
    .task("polish", uses="action:set", needs=["gate"], with_={"mode": "strict"})
    .task("quick", uses="action:set", needs=["gate"], with_={"mode": "quick"})
    .task(
        "refine",
        uses="action:set",
        needs=["polish"],
        loop=loop(3, "${{ vars.loopIndex < 2 }}", initial={"draft": "none"}),
        with_={"round": "${{ vars.loopIndex }}", "previous": "${{ vars.loopPrevious }}"},
    )
    .task(
        "summary",
        uses="workflow:summarize",
        needs=["review"],
        with_={"reviews": "${{ tasks.review.output.items }}"},
    )
)
