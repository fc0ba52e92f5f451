// The public surface of src/env for the rollout, training, evaluation and UI code. See src/env/README.md.

export type {
  ChatMessage,
  ChecklistItem,
  Domain,
  ExpertOptions,
  ExpertResult,
  GroundingExample,
  JsonSchema,
  Observation,
  ObservationErrorCode,
  Row,
  Step,
  Task,
  TaskSource,
  ToolCall,
  ToolDefinition,
  ToolSpec,
  Turn,
  UserAct,
  UserSimulator,
  UserStopToken,
  UserTurn,
} from './domain';
export { agentSteps, AGENT_GREETING, ToolError, toolDefinitions, USER_OUT_OF_SCOPE, USER_STOP, USER_STOP_TOKENS, USER_TRANSFER, userStopToken } from './domain';
export { breaksConfirmation, isExplicitYes, normaliseForMatch, unconfirmedWrites } from './confirmation';
export type { ConfirmationDetail, ConfirmationOptions, UnconfirmedWrite } from './confirmation';
export { Environment } from './env';
export { BaseData, Store } from './store';
export type { Overlay, StoreTx } from './store';
export {
  endsEpisode,
  executeParsed,
  formatCall,
  formatObservation,
  parse,
  parseObservation,
  serializeObservation,
  MAX_BLOCK,
  MAX_CALLS,
  MAX_DEPTH,
  MAX_TEXT,
} from './toolcall';
export type { CallParseError, ParseResult, ParsedPart } from './toolcall';
export { EMPTY_RESPONSE_REWARD, judge } from './judge';
export type { ItemVerdict, JudgeResult } from './judge';
export { factStated, realReward, replayHash } from './reward';
export type { RealReward } from './reward';
export { rowsFromEpisode } from './rows';
export { checklistFromReference, loadTaskFile, loadTau2Tasks, TaskFileError } from './tau2';
export type { Tau2Task } from './tau2';
export { jsonDiff, replayTask, traceLineText } from './trace';
export type { TraceLine } from './trace';
export { canonicalJson, compactJson, hash64, pyJson } from './json';
export { RETAIL_POLICY, RETAIL_TOOLS, retailBase, retailDomain, retailEnvFactory } from './retail/index';
export type { Family, RetailIntent, RetailTask } from './retail/index';
export { retailBaseFromUrl } from './retail/browser';
