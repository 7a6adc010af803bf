// Types of village_client.mjs (the bridge protocol: docs/protocol.md).

export const PROTOCOL_VERSION: 1;

export class BridgeError extends Error {
  code: string;
  detail: string;
  id: number | string | null;
}

export interface ArrayMap {
  dtype: "bool" | "int8" | "uint8" | "int16" | "uint16" | "int32" | "uint32" | "float32" | "float64";
  shape: number[];
  data: Uint8Array;
}

export function encodeArray(typed: ArrayBufferView & { length: number }, shape: number[], dtype?: ArrayMap["dtype"]): ArrayMap;
export function decodeArray(value: ArrayMap): { dtype: string; shape: number[]; data: ArrayBufferView };

export interface Hello {
  protocol: number;
  protocol_minor: number;
  package_version: string;
  policy: string;
  slots: number;
  obs_dim: number;
  n_actions: number;
  observation_layout: string[];
  action_names: string[];
  reaction_names: string[];
  event_types: string[];
  ops: string[];
  limits: Record<string, number>;
  temperature: number;
  personality_strength: number;
}

export interface Reaction {
  npc: string;
  alive: boolean;
  action: string;
  target: string | null;
  busy: boolean;
  reaction: string;
  intensity: number;
  cause: number | null;
  dest: [number, number];
  bark?: string;
}

export interface StepResult {
  tick: number;
  reactions: Reaction[];
  events: { event: number; type: string; actor: string | null; target: string | null; x: number | null; y: number | null; external: boolean }[];
}

export interface CurveKeys { serverPublicKey: string; publicKey: string; secretKey: string }

export class VillageBridgeClient {
  constructor(endpoint: string, options?: { timeoutMs?: number; retries?: number; curve?: CurveKeys | null });
  reconnects: number;
  request(op: string, fields?: Record<string, unknown>): Promise<Record<string, any>>;
  ping(): Promise<number>;
  hello(client?: string): Promise<Hello>;
  act(obs: Float32Array, rows: number, obsDim: number, options?: {
    mask?: Uint8Array | null; nActions?: number; deterministic?: boolean; withProbs?: boolean; temperature?: number | null;
    personalityStrength?: number | null;
  }): Promise<{ actions: Int32Array; probs: Float32Array | null; policy: string }>;
  sessionCreate(options: {
    world?: string; npcs?: Record<string, unknown>[]; relationships?: Record<string, unknown>[];
    actors?: Record<string, unknown>[]; width?: number; height?: number; sight_radius?: number; seed?: number;
    deterministic?: boolean; temperature?: number; personalityStrength?: number | null;
  }): Promise<{ session: string; npcs: string[]; actors: string[]; tick: number }>;
  sessionEvent(session: string, type: "death" | "attack" | "gift" | "talk", options: {
    actor?: string | number | null; target: string | number; position?: [number, number] | null;
    witnesses?: (string | number)[] | null;
  }): Promise<{ event: number; queued: number }>;
  sessionStep(session: string, bodies?: { pos?: Float32Array; health?: Float32Array; alive?: Uint8Array; entities?: number }): Promise<StepResult>;
  sessionState(session: string, npc?: string | number | null): Promise<{ tick: number; npcs: Record<string, any>[] }>;
  sessionClose(session: string): Promise<{ closed: boolean }>;
  reload(policy?: string | null): Promise<{ policy: string; load_ms: number }>;
  stats(): Promise<Record<string, any>>;
  close(): void;
}
