// The retail domain (τ²-bench retail, June 2025 release), assembled from its parts.

import { Environment } from '../env';
import type { BaseData } from '../store';
import { RETAIL_TOOLS } from './tools';

export { RETAIL_TOOLS, RETAIL_WRITE_TOOLS } from './tools';
export { RETAIL_FLOAT_KEYS, retailBase } from './types';

/** A factory of fresh retail environments over one shared base. */
export function retailEnvFactory(base: BaseData): () => Environment {
  return () => new Environment(base, RETAIL_TOOLS);
}
