// The closed error vocabulary of zlink (src/error.rs) and the client's close
// reasons (src/wire/client/frame.rs), as the server puts them on the wire.
//
// The tables below are written by hand from src/error.rs's `reasons!` table
// and frame.rs's `CloseReason`; test/error_table.test.mjs reads those Rust
// files and fails when the two disagree (a code, a kind, a name or a text).

/** ErrorKind codes (src/error.rs `ErrorKind`). */
export const ErrorKind = {
  Unavailable: 1,
  InvalidOperation: 2,
  NotFound: 3,
  DeadlineExceeded: 4,
  Cancelled: 5,
  Configuration: 6,
  Application: 7,
} as const;
export type ErrorKindName = keyof typeof ErrorKind;

/** One row of the `reasons!` table: code, kind, text. */
export interface ReasonInfo {
  readonly code: number;
  readonly kind: ErrorKindName;
  readonly text: string;
}

/** The server's reasons, in the order src/error.rs lists them. */
export const Reasons = {
  SessionNotBound: { code: 1, kind: "InvalidOperation", text: "session-not-bound: bind the actor first" },
  ObjectGenerationMismatch: { code: 2, kind: "InvalidOperation", text: "the actor's ObjectGeneration differs" },
  BindInProgress: { code: 3, kind: "InvalidOperation", text: "a bind of this actor is already in progress on this session" },
  NotAnswered: { code: 5, kind: "InvalidOperation", text: "the packet handler neither relayed nor answered the request" },
  NotSupported: { code: 4, kind: "InvalidOperation", text: "the receiving node does not support this operation" },
  MalformedRecord: { code: 6, kind: "InvalidOperation", text: "the request record is malformed" },
  MessageTooLarge: { code: 25, kind: "InvalidOperation", text: "the message is larger than a client frame may carry" },
  RateLimited: { code: 26, kind: "Unavailable", text: "the session sends faster than its rate limit" },
  TooManyTimers: { code: 27, kind: "InvalidOperation", text: "the actor has as many pending timers as it may" },
  TimerPeriodTooShort: { code: 28, kind: "InvalidOperation", text: "a repeating timer's period is shorter than 1 ms" },
  HandoffTooLarge: { code: 7, kind: "InvalidOperation", text: "the actor's state and queued work do not fit one handoff record" },
  RelocationTargetInvalid: { code: 8, kind: "InvalidOperation", text: "the relocation target cannot take this actor" },
  NotAuthenticated: { code: 9, kind: "InvalidOperation", text: "the client did not authenticate" },
  StaleLocation: { code: 10, kind: "Unavailable", text: "the actor is not at this location and no Message Follow route exists" },
  StaleBinding: { code: 11, kind: "Unavailable", text: "the binding was replaced or ended" },
  StaleNodeGeneration: { code: 12, kind: "Unavailable", text: "the owner node restarted since the route was stored" },
  StaleAuthority: { code: 13, kind: "Unavailable", text: "authority over the actor moved" },
  RelocationSealed: { code: 14, kind: "Unavailable", text: "the actor is being relocated" },
  SessionClosing: { code: 15, kind: "Unavailable", text: "the session is closing" },
  LeaseExpired: { code: 16, kind: "Unavailable", text: "the owner lease lapsed" },
  QueueFull: { code: 17, kind: "Unavailable", text: "a bounded queue is full" },
  PeerUnreachable: { code: 18, kind: "Unavailable", text: "the owner node is not reachable" },
  StoreUnavailable: { code: 19, kind: "Unavailable", text: "the location store is unavailable" },
  NoActorFactory: { code: 20, kind: "NotFound", text: "no actor factory is registered for this type" },
  NoPacketHandler: { code: 21, kind: "NotFound", text: "no handler is registered for this packet key" },
  ShuttingDown: { code: 22, kind: "Unavailable", text: "the node is shutting down" },
  RelocationAborted: { code: 23, kind: "Unavailable", text: "the relocation was aborted" },
  MeshUnreachable: { code: 24, kind: "Unavailable", text: "the actor's mesh is not one this node reaches its owner through" },
  OutcomeUnknown: { code: 29, kind: "Unavailable", text: "the request may or may not have run: a connection it crossed ended first" },
  Deadline: { code: 30, kind: "DeadlineExceeded", text: "the deadline passed" },
  CallerCancelled: { code: 40, kind: "Cancelled", text: "the caller cancelled" },
  InvalidConfiguration: { code: 50, kind: "Configuration", text: "the configuration is invalid" },
  ActorInOtherSpot: { code: 60, kind: "InvalidOperation", text: "the actor already belongs to another Spot" },
  NotPlacedWithSpot: { code: 61, kind: "InvalidOperation", text: "an actor of a SpotWide Spot must be named <spot>/<name>" },
  SpotIdInUse: { code: 62, kind: "InvalidOperation", text: "a Spot of another kind already has this id" },
  NoSpotKind: { code: 63, kind: "NotFound", text: "no Spot kind is registered under this name" },
  NotRelocatable: { code: 64, kind: "InvalidOperation", text: "the actor cannot be relocated" },
  MalformedPayload: { code: 65, kind: "InvalidOperation", text: "the payload is not a valid encoding of its message type" },
  Application: { code: 70, kind: "Application", text: "the application refused the request" },
  TurnAlreadyAwaits: { code: 66, kind: "InvalidOperation", text: "this turn already awaits" },
  TurnOfAnotherType: { code: 67, kind: "InvalidOperation", text: "the turn's continuation is for another actor type" },
} as const satisfies Record<string, ReasonInfo>;
export type ServerReasonName = keyof typeof Reasons;

/**
 * Reasons only this client produces; they never travel on the wire, so they
 * have no code. (`OutcomeUnknown` — the connection dropped, or the client
 * was closed, while the request was in flight: the server may or may not
 * have run it, and the client never sends it again — is in the server's
 * table, code 29, since issue 21 made it part of the closed vocabulary; this
 * client raises it with `remote: false`.)
 *
 * - `NotConnected` (Unavailable): there was no logged-in connection when the
 *   call was made. Nothing was sent; retrying is safe.
 * - `ClientClosed` (Cancelled): the client is closed for good (`close()`,
 *   a `Replaced` or `AuthenticationFailed` close, or a refused login).
 *   Nothing was sent.
 * - `LoginFailed` (Unavailable): the login request did not succeed; the
 *   error's `cause` is its ZlinkError.
 * - `TransportFailed` (Unavailable): the transport could not be opened
 *   (connection refused, DNS, no WebSocket in this runtime…); `cause`
 *   holds the platform's error.
 */
export const LocalReasons = {
  NotConnected: { kind: "Unavailable", text: "the client has no logged-in connection: nothing was sent" },
  ClientClosed: { kind: "Cancelled", text: "the client is closed" },
  LoginFailed: { kind: "Unavailable", text: "the login request failed" },
  TransportFailed: { kind: "Unavailable", text: "the transport could not be opened" },
} as const satisfies Record<string, { kind: ErrorKindName; text: string }>;
export type LocalReasonName = keyof typeof LocalReasons;

export type ReasonName = ServerReasonName | LocalReasonName;

const KIND_BY_CODE = new Map<number, ErrorKindName>(
  (Object.keys(ErrorKind) as ErrorKindName[]).map((name) => [ErrorKind[name], name]),
);
const REASON_BY_CODE = new Map<number, ServerReasonName>(
  (Object.keys(Reasons) as ServerReasonName[]).map((name) => [Reasons[name].code, name]),
);

/** The ErrorKind a wire code names, if any. */
export function errorKindFromCode(code: number): ErrorKindName | undefined {
  return KIND_BY_CODE.get(code);
}

/** The server Reason a wire code names, if any. */
export function reasonFromCode(code: number): ServerReasonName | undefined {
  return REASON_BY_CODE.get(code);
}

/** How a request or the client failed: an ErrorKind with one reason. */
export class ZlinkError extends Error {
  /** The public kind (src/error.rs ErrorKind). */
  readonly kind: ErrorKindName;
  /** The reason: a server reason, or one of {@link LocalReasons}. */
  readonly reason: ReasonName;
  /** The reason's wire code; `undefined` for a local reason. */
  readonly reasonCode: number | undefined;
  /**
   * The application's own code, for kind `Application` (the game's
   * `Error::app(code, detail)`); 0 for every other error.
   */
  readonly code: number;
  /**
   * The error's detail: the application's text for kind `Application`;
   * for a server error, what it is about (`actor player-7`, `type
   * Move: …`, `packet key 9`); for a local one, the circumstances. Empty
   * when there is none.
   */
  readonly detail: string;
  /** True when the server sent this error (an Error frame). */
  readonly remote: boolean;
  /**
   * True when the request may or may not have run on the server:
   * `OutcomeUnknown`, and a local `Deadline` or `CallerCancelled` of a
   * request that was sent. The client never resends such a request.
   */
  readonly outcomeUnknown: boolean;

  constructor(
    reason: ReasonName,
    options: { remote?: boolean; outcomeUnknown?: boolean; cause?: unknown; detail?: string; code?: number } = {},
  ) {
    const server = (Reasons as Record<string, ReasonInfo>)[reason];
    const local = (LocalReasons as Record<string, { kind: ErrorKindName; text: string }>)[reason];
    const info = server ?? local;
    const kind = info!.kind;
    const code = options.code ?? 0;
    const detail = options.detail ?? "";
    super(
      reason === "Application"
        ? `application error ${code}: ${detail}`
        : `${kind}: ${info!.text}${detail ? ` (${detail})` : ""}`,
    );
    this.name = "ZlinkError";
    this.kind = kind;
    this.reason = reason;
    this.reasonCode = server?.code;
    this.code = code;
    this.detail = detail;
    this.remote = options.remote ?? false;
    this.outcomeUnknown = options.outcomeUnknown ?? reason === "OutcomeUnknown";
    if (options.cause !== undefined) {
      (this as { cause?: unknown }).cause = options.cause;
    }
  }
}

/** CloseReason codes (docs/wire.md "Client frames"). */
export const CloseReason = {
  Replaced: 1,
  SealTimeout: 2,
  ActorRequested: 3,
  Shutdown: 4,
  ProtocolError: 5,
  KeepaliveTimeout: 6,
  Application: 7,
  AuthenticationFailed: 8,
  SessionLimit: 9,
} as const;
export type CloseReasonName = keyof typeof CloseReason;

const CLOSE_BY_CODE = new Map<number, CloseReasonName>(
  (Object.keys(CloseReason) as CloseReasonName[]).map((name) => [CloseReason[name], name]),
);

/** The CloseReason a wire code names, if any. */
export function closeReasonFromCode(code: number): CloseReasonName | undefined {
  return CLOSE_BY_CODE.get(code);
}

/**
 * Close reasons after which the client never reconnects by itself:
 * `Replaced` (another connection logged in as this player: reconnecting
 * would evict it in turn, and the two would evict each other in a loop) and
 * `AuthenticationFailed` (the same credentials would fail again).
 */
export const TERMINAL_CLOSE_REASONS: ReadonlySet<CloseReasonName> = new Set<CloseReasonName>([
  "Replaced",
  "AuthenticationFailed",
]);
