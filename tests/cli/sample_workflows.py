"""Workflow texts shared by the CLI view tests (the inspect view and its snapshots)."""

FANNED = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: fanned}
spec:
  runtime: {budgets: {maxProviderRequests: 5}}
  policy: {approval: never}
  providers: {scripted: {kind: fake}}
  agents:
    talker:
      provider: scripted
      model: scripted
      instructions: answer
      maxOutputTokens: 32
      providerOptions: {finalText: done}
  actions:
    set: {kind: builtin.assign}
  tasks:
    - id: unit
      uses: action:set
      foreach: {items: [a, b]}
      with: {value: "${{ vars.item }}"}
    - {id: talk, uses: 'agent:talker', needs: [unit], with: {prompt: one}}
  outputs:
    said: "${{ tasks.talk.output.text }}"
"""
