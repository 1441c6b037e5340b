// Starts Azurite's queue or blob service with its data on disk (--location), and makes every
// change durable before Azurite answers the request that made it.
//
// Azurite keeps its metadata (queues, messages, containers, blobs, and where their bytes are)
// in LokiJS databases that it saves every 5 s (autosaveInterval in its Loki*MetadataStore),
// and LokiJS writes a save without fsync. A SIGKILL therefore lost up to 5 s of acknowledged
// messages. Message and blob bytes are already fdatasync'ed by Azurite's FSExtentStore.
// Two changes, both outside Azurite's own code:
// - LokiJS's file adapter saves durably: it writes a temporary file, fdatasyncs it, renames
//   it over the database and fsyncs the directory, without blocking the event loop;
// - every async method of the metadata stores that a request calls (not one the store calls
//   on itself), once it has resolved, waits for a save that holds everything it saw or
//   changed before Azurite answers: if its database has changed since the last save began,
//   the next save; else the save being written, if any.
// Group commit: one save of a database is written at a time, and the requests that changed
// it while one was being written all wait for the next one, which serialises the database
// once for all of them when the one before is on disk. A save clears the dirty flags and
// serialises in one synchronous step when it begins, so a change is either in the save
// being written or flagged for the next. Each save still rewrites the whole database
// (LokiJS has no incremental file format), so its cost grows with the number of messages
// and blobs kept; what group commit changes is that concurrent requests share it (before,
// each changing request saved and fsynced synchronously, one after the other: about 6 queue
// sends a second with 1,000 messages kept). See bench/local_writes.py.
//
// Usage: node scripts/azurite.js queue|blob [azurite-queue or azurite-blob options...]
"use strict";
const { AsyncLocalStorage } = require("async_hooks");
const fs = require("fs");
const path = require("path");
const Loki = require("lokijs");

const SERVICES = {
  queue: {
    main: "azurite/dist/src/queue/main.js",
    stores: ["azurite/dist/src/queue/persistence/LokiQueueMetadataStore"],
  },
  blob: {
    main: "azurite/dist/src/blob/main.js",
    stores: ["azurite/dist/src/blob/persistence/LokiBlobMetadataStore"],
  },
};
const EXTENT_STORE = "azurite/dist/src/common/persistence/LokiExtentMetadataStore";
// Azurite's queue service appends every message body to one extent file at a time
// (maxConcurrency 1 in its DEFAULT_QUEUE_PERSISTENCE_ARRAY; the blob service has 50), and
// each append waits for its extent database's save before the next begins: concurrent
// sends never shared a save, and group commit gained them nothing (1,000 sends 8 at a time:
// one save of each database per send, 6.5 ms of CPU each, 150 a second at most). With 32
// extents appended at once they share saves: 32 at a time, 2.5 ms each (figures in
// docs/local-stack.md). Every append is still fdatasync'ed before its save.
const QUEUE_WRITE_EXTENTS = 32;
const QUEUE_CONSTANTS = "azurite/dist/src/queue/utils/constants";
// Methods that manage the store itself: init and close save on their own.
const NOT_REQUESTS = new Set(["constructor", "init", "close", "clean"]);

function fatal(what, err) {
  // Memory is ahead of the disk now: stop rather than acknowledge anything more.
  console.error(`azurite (durable): ${what}: ${err && err.message ? err.message : err}`);
  process.exit(1);
}

async function writeDurably(file, text) {
  const tmp = `${file}~`;
  const out = await fs.promises.open(tmp, "w");
  try {
    await out.writeFile(text);
    await out.datasync();
  } finally {
    await out.close();
  }
  await fs.promises.rename(tmp, file);
  const dir = await fs.promises.open(path.dirname(file), "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

// Writes of each database file, one at a time and in order: the promise of the last one
// queued, until it is on disk.
const tails = new Map();

function queueWrite(file, text) {
  const done = (tails.get(file) || Promise.resolve())
    .then(() => writeDurably(file, text))
    .catch((err) => fatal(`cannot save ${file}`, err));
  tails.set(file, done);
  done.then(() => {
    if (tails.get(file) === done) {
      tails.delete(file);
    }
  });
  return done;
}

// LokiJS's own saves (its 5 s autosave, init, close) queue with the group commit's.
Loki.LokiFsAdapter.prototype.saveDatabase = function saveDatabase(dbname, dbstring, callback) {
  queueWrite(dbname, dbstring).then(() => callback());
};

// Azurite clears expired messages on every receive and peek (coll.remove(found) in
// LokiQueueMetadataStore.clearExpiredMessages), and LokiJS marks a collection changed even
// when it removes nothing: every poll of an empty queue would rewrite the database.
for (const name of ["removeBatch", "removeBatchByPositions"]) {
  const remove = Loki.Collection.prototype[name];
  Loki.Collection.prototype[name] = function removeSome(list) {
    if (list.length > 0) {
      remove.call(this, list);
    }
  };
}

// A save begins: the flags cleared and the database serialised in one synchronous step, so
// a change is either in this save or flagged for the next.
function begin(db) {
  db.autosaveClearFlags();
  return queueWrite(db.filename, db.serialize());
}

// The save that will begin once the one being written is on disk, per database file: every
// request that changes the database meanwhile waits for it (group commit).
const next = new Map();

// Resolves once everything the caller saw or changed in the database is on disk.
function saved(db) {
  const file = db.filename;
  const writing = tails.get(file);
  if (!db.autosaveDirty()) {
    return writing; // unchanged since the last save began, which may hold what was read
  }
  if (!writing) {
    return begin(db);
  }
  if (!next.has(file)) {
    next.set(
      file,
      writing.then(() => {
        next.delete(file);
        return begin(db);
      }),
    );
  }
  return next.get(file);
}

// A store method looks documents up and then changes them, awaiting its own store methods
// in between (deleteBlob awaits checkContainerExist and getBlobWithLeaseUpdated, then removes
// the document these found). Another request's method must not run in between: a blob
// deleted or replaced meanwhile makes LokiJS throw on the change (a 500). Two rules keep a
// method whole:
// - only the outermost store call waits for the save: a call the store makes on itself
//   (marked by `inside`, the databases whose store methods the async call chain is in)
//   returns at once;
// - the outermost calls on a database run one at a time (`turns`). They touch only memory,
//   so a turn lasts microseconds, but without it the requests that a save wakes together
//   (group commit) run their methods interleaved, one await each in turn.
const inside = new AsyncLocalStorage();
const turns = new Map(); // database -> the promise of the last outermost call queued on it

function inTurn(db, body) {
  const run = (turns.get(db) || Promise.resolve()).then(body);
  const done = run.then(
    () => undefined,
    () => undefined,
  );
  turns.set(db, done);
  done.then(() => {
    if (turns.get(db) === done) {
      turns.delete(db);
    }
  });
  return run;
}

function durableStore(modulePath) {
  const Store = require(modulePath).default;
  for (const name of Object.getOwnPropertyNames(Store.prototype)) {
    const method = Store.prototype[name];
    if (NOT_REQUESTS.has(name) || method.constructor.name !== "AsyncFunction") {
      continue;
    }
    Store.prototype[name] = async function durableMethod(...args) {
      const outer = inside.getStore();
      if (outer && outer.has(this.db)) {
        return method.apply(this, args); // a call the store makes on itself
      }
      const dbs = new Set(outer).add(this.db);
      try {
        return await inTurn(this.db, () => inside.run(dbs, () => method.apply(this, args)));
      } finally {
        await saved(this.db);
      }
    };
  }
}

const service = SERVICES[process.argv[2]];
if (!service) {
  console.error("usage: azurite.js queue|blob [azurite options...]");
  process.exit(2);
}
for (const store of [...service.stores, EXTENT_STORE]) {
  durableStore(store);
}
if (process.argv[2] === "queue") {
  for (const location of require(QUEUE_CONSTANTS).DEFAULT_QUEUE_PERSISTENCE_ARRAY) {
    location.maxConcurrency = QUEUE_WRITE_EXTENTS;
  }
}
const main = require.resolve(service.main);
process.argv = [process.argv[0], main, ...process.argv.slice(3)];
require(main);
