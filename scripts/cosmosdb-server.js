// Starts @vercel/cosmosdb-server on loopback with HTTP keep-alive. Its own CLI answers every
// request with "connection: close", so each SDK call paid a new TLS handshake: with 16
// agents polling, the API spent most of its CPU setting up connections.
// Usage: node scripts/cosmosdb-server.js HOST PORT
"use strict";
const { createHttpsServer } = require("@vercel/cosmosdb-server");

const [host, port] = process.argv.slice(2);
if (!host || !port) {
  console.error("usage: cosmosdb-server.js HOST PORT");
  process.exit(2);
}
const server = createHttpsServer({ keepAlive: true });
server.keepAliveTimeout = 60000;
server.listen(Number(port), host, () => {
  console.log(`Ready to accept HTTPS connections at ${host}:${port} (keep-alive)`);
});
