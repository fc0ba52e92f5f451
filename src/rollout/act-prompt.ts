// The Act prompt: the domain's policy as the system message, the tools, the conversation so far, and the
// assistant generation prompt, in Qwen3's chat format (chat.ts). One function, shared by rollouts and by
// whoever builds Act training rows from expert data, so both see byte-identical prompts.
import { renderChat, type ChatMessage, type ToolDefinition } from './chat';

export interface ActPromptOptions {
  /** Default false: the small policy answers directly (the template's empty think block is added). */
  enableThinking?: boolean;
}

export function buildActPrompt(
  systemPrompt: string,
  tools: readonly ToolDefinition[],
  messages: readonly ChatMessage[],
  opts: ActPromptOptions = {},
): string {
  return renderChat([{ role: 'system', content: systemPrompt }, ...messages], {
    tools,
    addGenerationPrompt: true,
    enableThinking: opts.enableThinking ?? false,
  });
}

/** Stop string of an Act generation: one call per turn, nothing generated past its closing tag. */
export const ACT_STOP = '</tool_call>';
/** Stop string of a Rehearse generation. */
export const REHEARSE_STOP = '</execution_result>';
