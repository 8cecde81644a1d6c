/// <reference path="./interfaces/agenthost-agent-guest.d.ts" />
/// <reference path="./interfaces/agenthost-agent-host.d.ts" />
/// <reference path="./interfaces/agenthost-agent-llm.d.ts" />
/// <reference path="./interfaces/agenthost-agent-types.d.ts" />
/// <reference path="./interfaces/wasi-cli-environment.d.ts" />
declare module 'agenthost:typescript/agent@0.1.0' {
  export type * as AgenthostAgentHost010 from 'agenthost:agent/host@0.1.0'; // import agenthost:agent/host@0.1.0
  export type * as AgenthostAgentLlm010 from 'agenthost:agent/llm@0.1.0'; // import agenthost:agent/llm@0.1.0
  export type * as AgenthostAgentTypes010 from 'agenthost:agent/types@0.1.0'; // import agenthost:agent/types@0.1.0
  export type * as WasiCliEnvironment0212 from 'wasi:cli/environment@0.2.12'; // import wasi:cli/environment@0.2.12
  export * as guest from 'agenthost:agent/guest@0.1.0'; // export agenthost:agent/guest@0.1.0
}
