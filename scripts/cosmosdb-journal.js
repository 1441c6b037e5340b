// A write-ahead journal for @vercel/cosmosdb-server, which keeps every database, container and
// document in memory only.
//
// Hook: in that package every change of stored state goes through two methods of its Items
// class (lib/account/items.js), the store behind the databases of the account, the
// containers of a database and the documents and user-defined functions of a container:
// _set(data) stores a resource (create, and the second half of replace, upsert and patch) and
// delete(idOrRid, partition) removes one (delete, and the first half of replace). Both are
// patched here to record the resource as stored, system properties (_rid, _etag, _ts, _self)
// included, so a replay restores the same ids, partition keys, content and ETags.
//
// Durability: records are appended to the journal file, and each HTTP response is held back
// until every record appended before it is written and fdatasync'ed: an acknowledged write is
// on disk, and no response shows data that is not. Concurrent requests share one fdatasync
// (group commit).
//
// Compaction: at start, and whenever the journal has grown past max(compactBytes, twice its
// size after the last compaction), the whole state is written as put records to
// journal-<n+1>.jsonl.tmp, fsync'ed, renamed into place and the older journal deleted; a
// crash at any step leaves one complete journal, the newest, to load.
"use strict";
const fs = require("fs");
const path = require("path");
const Items = require("@vercel/cosmosdb-server/lib/account/items").default;

const HEADER = { format: "benchsvc-cosmosdb-journal", version: 1 };
const JOURNAL = /^journal-(\d+)\.jsonl$/;
const AT = Symbol("journal address"); // [] | [db] | [db, coll, "docs" | "udfs"]
const WRITE_CHUNK = 1 << 20;

let active = null; // the Journal recording changes; null while loading
const originalSet = Items.prototype._set;
const originalDelete = Items.prototype.delete;

// Children of a stored database or container get their address, so their changes are
// recorded. Partition key ranges have none: the package derives them from the container.
function addressChildren(items, stored) {
  const at = items[AT];
  if (!at) {
    return;
  }
  const item = items._data.get(stored._rid);
  if (at.length === 0) {
    item.collections[AT] = [stored.id];
  } else if (at.length === 1) {
    item.documents[AT] = [at[0], stored.id, "docs"];
    item.userDefinedFunctions[AT] = [at[0], stored.id, "udfs"];
  }
}

Items.prototype._set = function journaledSet(data) {
  const stored = originalSet.call(this, data);
  addressChildren(this, stored);
  if (active && this[AT]) {
    active.record({ op: "put", at: this[AT], doc: stored, n: this._ridCount });
  }
  return stored;
};

Items.prototype.delete = function journaledDelete(idOrRid, partition) {
  const existing = this[AT] ? this._item("/id", idOrRid, partition).read() : undefined;
  const result = originalDelete.call(this, idOrRid, partition);
  if (active && existing) {
    active.record({ op: "del", at: this[AT], rid: existing._rid });
  }
  return result;
};

function defineFunction(body) {
  // As the package compiles a user-defined function (lib/account/user-defined-functions.js).
  // eslint-disable-next-line no-new-func
  return new Function(`"use strict";return (${body})`)();
}

function itemsAt(account, at) {
  if (at.length === 0) {
    return account.databases;
  }
  const db = account.database(at[0]);
  if (!db.read()) {
    throw new Error(`database ${JSON.stringify(at[0])} does not exist`);
  }
  if (at.length === 1) {
    return db.collections;
  }
  const coll = db.collection(at[1]);
  if (!coll.read()) {
    throw new Error(`container ${JSON.stringify(at[1])} does not exist`);
  }
  return at[2] === "udfs" ? coll.userDefinedFunctions : coll.documents;
}

function apply(account, rec) {
  const items = itemsAt(account, rec.at);
  if (rec.op === "put") {
    items._set(rec.doc);
    if (rec.at[2] === "udfs") {
      items.functions[rec.doc.id] = defineFunction(rec.doc.body);
    }
  } else if (rec.op === "del") {
    const item = items._data.get(rec.rid);
    if (!item) {
      throw new Error(`deletes ${rec.rid}, which does not exist`);
    }
    originalDelete.call(items, rec.rid);
    if (rec.at[2] === "udfs") {
      delete items.functions[item.read().id];
    }
  } else if (rec.op !== "rid") {
    throw new Error(`unknown record ${JSON.stringify(rec.op)}`);
  }
  if (rec.n !== undefined) {
    // New resources must not reuse a resource id (_rid) the package handed out before.
    items._ridCount = Math.max(items._ridCount, rec.n);
  }
}

// The whole state as records that rebuild it: parents before children, each store's
// documents in the package's own order (that of its Map, which queries return).
function* snapshot(account) {
  function* store(items) {
    for (const item of items._data.values()) {
      const doc = item.read();
      yield { op: "put", at: items[AT], doc };
      if (items[AT].length === 0) {
        yield* store(item.collections);
      } else if (items[AT].length === 1) {
        yield* store(item.documents);
        yield* store(item.userDefinedFunctions);
      }
    }
    yield { op: "rid", at: items[AT], n: items._ridCount };
  }
  yield* store(account.databases);
}

function fsyncDir(dir) {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function* lines(buffer) {
  let start = 0;
  let number = 1;
  for (;;) {
    const end = buffer.indexOf(10, start);
    if (end < 0) {
      if (start < buffer.length) {
        yield { number, text: null, torn: buffer.length - start }; // no newline: torn write
      }
      return;
    }
    yield { number, text: buffer.toString("utf8", start, end) };
    start = end + 1;
    number += 1;
  }
}

class Journal {
  constructor(dir, account, { compactBytes }) {
    this.dir = dir;
    this.account = account;
    this.compactBytes = compactBytes;
    this.pending = []; // serialized records not yet written
    this.appended = 0; // records appended so far
    this.durable = 0; // records written and fdatasync'ed
    this.waiters = []; // [record count, send the response]
    this.flushing = false;
  }

  static open(dir, account, options) {
    fs.mkdirSync(dir, { recursive: true });
    account.databases[AT] = [];
    const journal = new Journal(dir, account, options);
    journal.load();
    active = journal;
    return journal;
  }

  file(generation) {
    return path.join(this.dir, `journal-${generation}.jsonl`);
  }

  load() {
    const generations = [];
    for (const name of fs.readdirSync(this.dir)) {
      const m = JOURNAL.exec(name);
      if (m) {
        generations.push(Number(m[1]));
      } else if (name.endsWith(".jsonl.tmp")) {
        fs.unlinkSync(path.join(this.dir, name)); // a compaction that did not finish
      }
    }
    generations.sort((a, b) => a - b);
    this.generation = generations.length ? generations[generations.length - 1] : 0;
    for (const older of generations.slice(0, -1)) {
      fs.unlinkSync(this.file(older)); // already in the newest journal
    }
    this.records = this.generation > 0 ? this.replay(this.file(this.generation)) : 0;
    // Start from a compacted journal: drops a torn last record, bounds the size.
    this.compact();
  }

  replay(file) {
    const where = line => `${file}, line ${line}`;
    let records = 0;
    for (const { number, text, torn } of lines(fs.readFileSync(file))) {
      if (text === null) {
        // Written, but not fdatasync'ed and so never acknowledged: the process died.
        console.log(`${where(number)}: dropped a torn last record (${torn} bytes)`);
        break;
      }
      let rec;
      try {
        rec = JSON.parse(text);
      } catch (err) {
        throw new Error(`${where(number)}: ${err.message}`);
      }
      if (number === 1) {
        if (rec.format !== HEADER.format || rec.version !== HEADER.version) {
          throw new Error(`${where(1)}: not a ${HEADER.format} version ${HEADER.version}`);
        }
        continue;
      }
      try {
        apply(this.account, rec);
      } catch (err) {
        throw new Error(`${where(number)}: ${err.message}`);
      }
      records += 1;
    }
    return records;
  }

  openForAppend() {
    this.fd = fs.openSync(this.file(this.generation), "a");
    this.bytes = fs.fstatSync(this.fd).size;
    this.compactAt = Math.max(this.compactBytes, 2 * this.bytes);
  }

  // Writes the whole state to the next journal; only when nothing is pending (at start,
  // or after a flush), so the state in memory is exactly what is on disk.
  compact() {
    const next = this.generation + 1;
    const tmp = `${this.file(next)}.tmp`;
    const fd = fs.openSync(tmp, "w");
    try {
      let chunk = [JSON.stringify(HEADER)];
      let size = 0;
      for (const rec of snapshot(this.account)) {
        const text = JSON.stringify(rec);
        chunk.push(text);
        size += text.length;
        if (size >= WRITE_CHUNK) {
          fs.writeFileSync(fd, `${chunk.join("\n")}\n`);
          chunk = [];
          size = 0;
        }
      }
      if (chunk.length) {
        fs.writeFileSync(fd, `${chunk.join("\n")}\n`);
      }
      fs.fdatasyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.file(next));
    fsyncDir(this.dir);
    if (this.fd !== undefined) {
      fs.closeSync(this.fd);
    }
    if (this.generation > 0) {
      fs.unlinkSync(this.file(this.generation));
    }
    this.generation = next;
    this.openForAppend();
  }

  record(rec) {
    this.pending.push(JSON.stringify(rec));
    this.appended += 1;
  }

  // Calls send once every record appended so far is on disk.
  whenDurable(send) {
    if (this.durable === this.appended) {
      send();
      return;
    }
    this.waiters.push([this.appended, send]);
    this.flush();
  }

  flush() {
    if (this.flushing || this.pending.length === 0) {
      return;
    }
    this.flushing = true;
    const upto = this.appended;
    const data = Buffer.from(`${this.pending.join("\n")}\n`);
    this.pending = [];
    this.write(data, 0, err => {
      if (err) {
        fatal(`cannot write ${this.file(this.generation)}`, err);
      }
      fs.fdatasync(this.fd, err2 => {
        if (err2) {
          fatal(`cannot fdatasync ${this.file(this.generation)}`, err2);
        }
        this.flushing = false;
        this.durable = upto;
        this.bytes += data.length;
        const ready = this.waiters.filter(([count]) => count <= upto);
        this.waiters = this.waiters.filter(([count]) => count > upto);
        if (this.pending.length) {
          this.flush();
        } else if (this.bytes > this.compactAt) {
          try {
            this.compact();
          } catch (err3) {
            fatal(`cannot compact ${this.dir}`, err3);
          }
        }
        for (const [, send] of ready) {
          send();
        }
      });
    });
  }

  write(data, offset, done) {
    fs.write(this.fd, data, offset, data.length - offset, null, (err, written) => {
      if (err || offset + written === data.length) {
        done(err);
      } else {
        this.write(data, offset + written, done);
      }
    });
  }
}

function fatal(what, err) {
  // Memory is ahead of the disk now: stop rather than acknowledge anything more.
  console.error(`cosmosdb-server journal: ${what}: ${err.message}`);
  process.exit(1);
}

module.exports = { Journal };
