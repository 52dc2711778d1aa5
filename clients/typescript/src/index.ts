export { createPlatformClient, type PlatformClient, type PlatformClientOptions, type CallMethod, type SuccessData } from './client.js';
export { ApiError, isApiError } from './errors.js';
export { errorCodes, type ErrorCode } from './error-codes.js';
export { memoryTokenStore, type Tokens, type TokenStore } from './tokens.js';
export type { RetryOptions } from './retry-policy.js';
export type { paths, components } from './schema.js';
export {
  openEcsStream,
  openClientEcsStream,
  type EcsStream,
  type EcsStreamOptions,
  type EcsTick,
  type EcsChange,
  type EcsSnapshot,
  type EcsHello,
  type WebSocketLike,
  type WebSocketConstructor,
} from './ecs-stream.js';
