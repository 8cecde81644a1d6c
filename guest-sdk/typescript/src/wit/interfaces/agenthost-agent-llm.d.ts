/// <reference path="./agenthost-agent-types.d.ts" />
declare module 'agenthost:agent/llm@0.1.0' {
  /**
   * The aliases the manifest declares, in name order.
   */
  export function aliases(): Array<string>;
  /**
   * Calls the model, streaming its text into the turn's events; journals
   * LLM_CALL before each request leaves and LLM_RESULT after it.
   */
  export function complete(request: CompletionRequest): Completion;
  export type HostError = import('agenthost:agent/types@0.1.0').HostError;
  /**
   * One completion asked of a declared alias.
   */
  export interface CompletionRequest {
    /**
     * A `[llm.<alias>]` of the manifest; its `fallbacks` are tried in
     * order when it fails before its first token.
     */
    alias: string,
    /**
     * The conversation as JSON text: an array of OpenAI chat messages
     * (`system`, `user`, `assistant` with `tool_calls`, `tool`); the
     * host translates it for an `anthropic` alias.
     */
    messages: string,
    /**
     * The tools offered as JSON text: an array of OpenAI function tools
     * (`{"type":"function","function":{name,description,parameters}}`).
     */
    tools: string,
    /**
     * Extra request parameters as a JSON object (`temperature`, ...);
     * the host sets `model`, `stream` and the output-token cap itself.
     */
    parameters: string,
  }
  /**
   * A tool call the model asked for.
   */
  export interface ModelToolCall {
    /**
     * The provider's id of the call.
     */
    id: string,
    name: string,
    /**
     * Arguments as JSON text (as the model wrote them).
     */
    arguments: string,
  }
  /**
   * What a completion said. Its text is already journaled: the host
   * streamed it into one assistant message (MESSAGE_START, MESSAGE_DELTA,
   * MESSAGE_END), which the guest must not write again.
   */
  export interface Completion {
    /**
     * The message the text went to; none when the model wrote no text.
     */
    messageId?: string,
    text: string,
    /**
     * Hand these to `host.tool-calls` as the step's calls.
     */
    toolCalls: Array<ModelToolCall>,
    /**
     * `stop`, `length`, `tool_calls`, `content_filter`, ...
     */
    finishReason: string,
    /**
     * The alias that answered (the asked one, or a fallback).
     */
    servedBy: string,
    inputTokens: bigint,
    outputTokens: bigint,
  }
  /**
   * Why a completion failed.
   */
  export type LlmError = LlmErrorUnknownAlias | LlmErrorInvalidRequest | LlmErrorFailed | LlmErrorHost;
  /**
   * No `[llm.<alias>]` of that name is declared.
   */
  export interface LlmErrorUnknownAlias {
    tag: 'unknown-alias',
    val: string,
  }
  /**
   * The request is malformed (messages, tools or parameters).
   */
  export interface LlmErrorInvalidRequest {
    tag: 'invalid-request',
    val: string,
  }
  /**
   * Every alias tried failed (or one failed after its first token,
   * when no fallback may be tried): the provider's words.
   */
  export interface LlmErrorFailed {
    tag: 'failed',
    val: string,
  }
  /**
   * The host refused the effect (see `host-error`).
   */
  export interface LlmErrorHost {
    tag: 'host',
    val: HostError,
  }
}
