/// <reference path="./agenthost-agent-types.d.ts" />
declare module 'agenthost:agent/guest@0.1.0' {
  /**
   * Describes the agent. Runs once at deploy time with only
   * `SERVICE_MANIFEST=1` in the environment; must not depend on anything else.
   */
  export function describe(): Description;
  /**
   * Handles one turn. An `error` ends the turn with TURN_ERROR carrying the message.
   */
  export function handle(turn: Turn): void;
  export type Description = import('agenthost:agent/types@0.1.0').Description;
  export type Turn = import('agenthost:agent/types@0.1.0').Turn;
}
