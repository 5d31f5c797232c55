// Over 500 lines: the calibrator is one value whose private state (the binned samples, the
// rotation pairs' normal matrix, the fit in use and its screening) the binning, the fits and the
// file format all read and write; kept in one file so that this state stays private to it. Its
// linear algebra is in MagnetometerLinearAlgebra.swift, the refit thread in
// MagnetometerCalibratorRefit.swift, the store in MagnetometerCalibrationStore.swift.
internal import Glibc

/// The magnetometer's calibration learned online while the device moves, as Core Motion's
/// `CMCalibratedMagneticField` reports it: a hard-iron offset `c` (the board's own field) and a
/// symmetric soft-iron matrix `W` (the sensor's unequal gains and cross-axis coupling, and iron
/// that stretches the field in any direction), from which the field is `W · (raw − c)`. `W` has
/// determinant 1, so the calibrated field keeps the mean strength of the raw field's ellipsoid.
///
/// Samples are binned by direction (216 bins, about 15° across: a cube's faces in 6 × 6 cells)
/// around the first fits' offset (binned again while no fit is accepted yet); each bin keeps its newest ``samplesPerBin``, so a device held mostly one way
/// does not outweigh the rest. Every ``refitEvery`` samples taken, the calibration is fitted
/// again over the bins, in the best model the samples support:
///
/// - With the device's gravity direction for each sample
///   (``add(_:gravity:turn:turnRateCovariance:)``, what ``DeviceMotionFusion`` gives while its
///   accelerometer agrees with its estimate, ``CalibrationFeed``), a Gauss–Newton fit of
///   `|W (m − c)| = F` (the field's strength) and `ĝ · W (m − c) = D` (its vertical part,
///   constant wherever the device points): the second pins the offset even when the device
///   only tilts a little, as a hand-held phone does. The fit starts with `W` = identity (a
///   sphere); the full matrix is taken once the samples determine each of its entries to
///   within ``softIronUncertainty`` (their standard error from the fit's residual and its
///   normal matrix).
///   With the gyroscope's attitude for each sample as well
///   (``add(_:gravity:turn:turnRateCovariance:)``, what ``DeviceMotionFusion`` gives), each
///   sample is paired with a recent one the device turned at least ``minimumPairAngle`` from,
///   and `W(m_j − c) = dᵀ·W(m_i − c)` (the field did not move, the device turned by `d`) joins
///   the fit: three equations per pair, linear in `W` and `W·c`,
///   summed into a normal matrix that forgets over ``pairMemory`` pairs. They fix the offset
///   across every axis the device turns about, which a phone held in front of a user (turning
///   mostly about the vertical, tilting little) leaves loose in the other two. A pair counts
///   only while the gyroscope's bias about its turn's axis is known
///   (``maximumPairRateDeviation``).
/// - Without gravity (``add(_:)``), linear least squares: a sphere from 27 bins, then a general
///   ellipsoid `pᵀAp + 2bᵀp + j = 0` (trace of `A` fixed at 3: 9 parameters) from
///   ``ellipsoidCoverage`` bins, `W` being `A`'s symmetric inverse square root (by Jacobi
///   eigen-decomposition) normalised to determinant 1.
///
/// A fit is replaced by no correction at all (no offset, `W` = identity) when the raw samples are
/// as consistent by Akaike's criterion over the bins covered (the fit's offset, and matrix, count
/// as its parameters): an undistorted magnetometer is then not given the fit's own errors.
///
/// A fit is refused when it is implausible: `W` not positive definite, axes more than a factor 2
/// apart, a strength outside 5–500 µT. ``accuracy`` rises with the bins covered and falls with
/// the fit's residual (the RMS relative difference of the calibrated strengths from `F`) and,
/// with gravity, with the offset's standard error:
/// ``MagneticFieldCalibrationAccuracy/uncalibrated`` before a fit (with gravity: until 10 bins
/// are covered and the offset's standard error is under 2 µT); then `low`; `medium` from 12
/// bins with the soft-iron matrix determined (45 bins without gravity), the offset's standard
/// error under 1 µT and a residual under 4 %; `high` from 16 bins with the full soft-iron
/// matrix (or 90 bins), the standard error under 0.5 µT and a residual under 2 % (a level
/// reached stays while the error is within twice its bound and the residual within it). The
/// standard error is the fit's, from its residuals taken as independent: it understates the
/// offset's real error several times over (samples of one direction are not independent, and
/// the model does not hold exactly), so the levels rank fits, and do not bound the offset. A
/// fit found implausible drops
/// the stored samples the calibration in use puts far off. Once fitted, a sample
/// whose calibrated strength (or vertical part) is more than ``disturbanceTolerance`` of `F`
/// from the fit's (from `medium` on, ``residualTolerance`` times the fit's residual, within
/// ``calibratedTolerance``: 3–6 %) is a disturbance (a steel object passing) and is not
/// learned from. What stays within the tolerance is learned, a steel object's approach and
/// departure included: in a unit scenario, iio-sim's steel pass (a vertical dipole 1.5 m away,
/// 25 µT at its closest) moves a calibrated offset by up to 5.6 µT, almost all of it along the
/// vertical, where it does not turn the heading (BENCHMARKS.md, "The magnetometer calibrated").
///
/// A saved calibration (``text``, ``init(text:)``) starts at most at `medium`; it is checked
/// against the samples as they come and replaced by a new fit when it no longer matches them
/// (residual over 3 %) or when the new fit covers as many bins.
///
/// A field that has changed for good is learned afresh (``fieldChangeMemory``): a calibration,
/// saved or fitted, that refuses most samples from many directions for a while is forgotten (a
/// board moved into a case, a magnet fixed to it), and samples no calibration has explained for
/// a while age out of the bins.
struct MagnetometerCalibrator: Sendable, Hashable {
    /// Which model the calibration is in.
    enum Model: String, Sendable, Hashable {
        /// No fit yet.
        case none
        /// An offset and a strength (`W` = identity).
        case sphere
        /// An offset and an axis-aligned `W` (only from a saved calibration of version 1).
        case axisAligned = "axis-aligned"
        /// An offset and the full symmetric soft-iron matrix.
        case ellipsoid
    }

    /// Samples kept per direction bin.
    var samplesPerBin = 16
    /// Samples taken between fits.
    var refitEvery = 40
    /// Relative difference in strength beyond which a sample is a disturbance.
    var disturbanceTolerance = 0.15
    /// From `medium` on, a sample is a disturbance beyond this many times the fit's residual…
    var residualTolerance = 4.0
    /// …bounded to this range (relative difference).
    var calibratedTolerance = 0.03...0.06
    /// Bins covered from which a fit without gravity may be a full ellipsoid.
    var ellipsoidCoverage = 70
    /// Standard error below which every soft-iron entry must be for the full matrix to be used.
    var softIronUncertainty = 0.012
    /// How far the soft-iron matrix is expected to be from identity at most (its entries' prior
    /// standard deviation).
    var softIronPrior = 0.1

    /// Pairs of samples the gyroscope relates are used once turned at least this far apart (radians)…
    var minimumPairAngle = 10 * Double.pi / 180
    /// …within the last this many samples taken (about a second at 80 Hz).
    var pairSpan = 64
    /// Pairs are forgotten with this time constant (pairs), so a changed board is learned again.
    var pairMemory = 4000.0
    /// A pair is used only while the gyroscope's bias about the pair's turn axis is known to this
    /// standard deviation (rad/s): an unknown bias turns every pair's turn the same wrong way, and
    /// thousands of pairs wrong alike would fit an offset and a matrix to it (a device only
    /// wobbling about its up-axis, whose bias there nothing else has taught yet).
    var maximumPairRateDeviation = 0.1 * Double.pi / 180

    /// Before the first fit is taken, a candidate whose offset is known to within 2 µT and whose
    /// strength is one the Earth's field has (20–70 µT) screens the samples as a fit does (a
    /// sample beyond ``disturbanceTolerance`` of its strength is not taken): a steel object
    /// passing before the device has turned through enough directions for a fit would otherwise
    /// fill the bins with a field that is not the Earth's, and the fits would follow it. After
    /// this many samples in a row refused, the candidate is dropped (it may be the one that is
    /// wrong) until the next.
    var candidatePatience = 800
    /// Samples offered over which a changed field is recognised, and after which it is learned
    /// afresh (``DeviceMotionFusion`` sets a minute of the magnetometer's samples):
    /// - while no calibration has explained the stored samples (their scatter about the fit and
    ///   about the raw field both over ``unexplainedScatter``) for this many, the samples offered
    ///   before the last this many are dropped at each fit (a magnet fixed to the device after
    ///   samples no calibration explains);
    /// - when, over this many, the calibration in use has refused three in four as disturbances,
    ///   from at least ``minimumChangedCoverage`` directions (the device turned: not a steel
    ///   desk it lies on), the calibration no longer describes the field (a magnet fixed to the
    ///   board, the board moved into a case): it is forgotten, with its samples and pairs, and
    ///   learned again as from the start.
    var fieldChangeMemory = 2000
    /// Direction bins the refused samples must come from for a calibration to be forgotten
    /// (``fieldChangeMemory``): as many as a first fit needs.
    static let minimumChangedCoverage = 10

    /// False for a copy that only applies a calibration (``applying``):
    /// ``add(_:gravity:turn:turnRateCovariance:)`` takes nothing.
    private(set) var isLearning = true
    /// The hard-iron offset, µT (device frame).
    private(set) var offset = Vector3.zero
    /// The soft-iron matrix `W` (symmetric, determinant 1; identity when none).
    private(set) var softIron = Matrix3.diagonal(1)
    /// The calibrated field's strength `F`, µT (0 before a fit).
    private(set) var strength = 0.0
    /// The calibrated field's component along gravity `D`, µT (0 when not fitted with gravity).
    private(set) var vertical = 0.0
    /// The fit's RMS relative residual.
    private(set) var residual = 1.0
    /// The largest standard error of the offset's components, µT (infinite when not known: a
    /// fit without gravity, a saved calibration).
    private(set) var offsetError = Double.infinity
    /// How long the magnetometer's samples lag the gyroscope's (seconds, ``MagnetometerLag``),
    /// measured while this calibration was in use and saved with it; nil when not measured. The
    /// calibrator itself does not use it: ``CalibrationFeed`` starts from it.
    var lag: Double?
    /// Direction bins that have held at least a few samples (since the samples were last binned
    /// around a new centre).
    private(set) var coverage = 0
    /// The model of the calibration in use.
    private(set) var model = Model.none
    /// How far the calibration can be trusted.
    private(set) var accuracy = MagneticFieldCalibrationAccuracy.uncalibrated
    /// True for a saved calibration not yet replaced by a fit of this run.
    private(set) var isSaved = false

    /// Whether a refit due runs in ``add(_:gravity:turn:turnRateCovariance:)`` (true), or is only
    /// noted (``isRefitDue``) for the owner to run on a copy elsewhere (``refitted()``, a
    /// ``MagnetometerRefit``) and ``adopt(_:)`` later, as ``DeviceMotionFusion`` does.
    var fitsInPlace = true
    /// A refit is due (only when not ``fitsInPlace``); ``takeRefit()`` clears it.
    private(set) var isRefitDue = false
    /// Refits run on this value (in place), and stored samples visited by the passes that change
    /// this value's samples (binning them again, evicting outliers): the work a refit did on the
    /// path that called ``add(_:gravity:turn:turnRateCovariance:)`` or ``adopt(_:)``.
    private(set) var refitsInPlace = 0
    private(set) var samplesRevisited = 0

    // Samples: per bin, `samplesPerBin` slots of (raw x, y, z, gravity x, y, z); gravity zero
    // when unknown. Allocated on the first sample.
    private var samples: [Double] = []
    /// The candidate that screens the samples before the first fit (offset and strength, scaled
    /// by `unit`; strength 0 for none), and how many samples in a row it has refused.
    private var screeningOffset = Vector3.zero
    private var screeningStrength = 0.0
    private var refusedInARow = 0
    private var binCounts = [Int](repeating: 0, count: MagnetometerCalibrator.binCount)
    private var binNext = [Int](repeating: 0, count: MagnetometerCalibrator.binCount)
    /// When each stored sample was offered (``offered`` at the time), per slot as in `samples`.
    private var offeredAt: [Int] = []
    /// Samples offered so far (finite ones, taken or not).
    private var offered = 0
    /// ``offered`` at the first of the fits in a row that explained nothing (nil after one that
    /// did; see ``fieldChangeMemory``).
    private var unexplainedSince: Int?
    /// In the current window of ``fieldChangeMemory`` samples judged by a calibration in use:
    /// the samples judged, those refused, and the bins of the directions refused in.
    private var judged = 0
    private var judgedRefused = 0
    private var refusedBins = BinSet()
    /// Calibrations forgotten (``fieldChangeMemory``); a refit of a copy taken before the last
    /// one is not adopted.
    private(set) var forgotten = 0
    private var sinceFit = 0
    /// The pairs' normal matrix (9 × 9, rows) in z = (W11, W22, W33, W12, W13, W23, b = W·c),
    /// scaled units: Σ AᵀA over the pairs, each pair's residual being A·z (see ``addPair``).
    /// Symmetric: only its upper half (column ≥ row) is kept; ``pairEntry(_:_:)`` reads it.
    private var pairInformation: [Double] = []
    /// The pairs summed in it (forgotten alike).
    private var pairCount = 0.0
    /// The last ``pairSpan`` samples taken (scaled) and the gyroscope's attitude at each: a ring
    /// of `recentCount` entries from `recentStart`, oldest first, allocated on the first pair.
    private var recentFields: [Vector3] = []
    private var recentTurns: [Quaternion] = []
    /// Each recent attitude's squared norm.
    private var recentNorms: [Double] = []
    private var recentStart = 0
    private var recentCount = 0
    /// The centre (scaled) the samples are binned around.
    private var binCentre = Vector3.zero
    /// Samples are fitted scaled by this (µT → about 1) to keep the equations well conditioned.
    private static let unit = 1.0 / 50
    /// The RMS scatter (of the field's strength and vertical part, relative to the strength) above
    /// which a calibration, fitted or the raw field, does not explain the samples: the bound a
    /// `medium` fit's residual keeps. On BROAD's recordings a fitted field scatters by 0.015, the
    /// raw field with a magnet fixed 1 cm from the sensor by 0.3, and a fit gone astray on it by
    /// 0.1–0.45.
    private static let unexplainedScatter = 0.04

    init() {}

    /// Whether the fit is usable.
    var isCalibrated: Bool { accuracy != .uncalibrated }

    /// The calibration alone, without the samples, taking no more (what the filter applies while
    /// ``DeviceMotionFusion`` learns).
    var applying: MagnetometerCalibrator {
        var c = MagnetometerCalibrator()
        c.isLearning = false
        c.offset = offset
        c.softIron = softIron
        c.strength = strength
        c.vertical = vertical
        c.residual = residual
        c.offsetError = offsetError
        c.coverage = coverage
        c.model = model
        c.accuracy = accuracy
        c.isSaved = isSaved
        c.lag = lag
        return c
    }

    /// The calibrated field of a raw sample (µT).
    func calibrated(_ raw: Vector3) -> Vector3 { softIron * (raw - offset) }

    /// Learns from a raw sample (µT) without its gravity; returns whether it was taken.
    @discardableResult
    mutating func add(_ raw: Vector3) -> Bool { add(raw, gravity: nil) }

    /// Learns from a raw sample (µT), the direction of gravity in the device frame at its time
    /// (any length; nil when unknown) and, when known, the attitude the gyroscope alone has
    /// integrated to (device to any fixed frame; ``breakPairs()`` when it restarts) with the
    /// covariance ((rad/s)², device frame) of the bias error its rates may still have (zero: exact
    /// rates). Returns whether it was taken (not a disturbance, learning).
    ///
    /// With the gyroscope's attitudes, two samples the device turned between are related: the
    /// Earth's field did not move, so the calibrated field turned back by the device's turn `d`,
    /// `W(m_j − c) = dᵀ·W(m_i − c)` (three equations, linear in W and b = W·c). Unlike the
    /// strength, this fixes the offset along every axis the device turns about, and the turns
    /// of a hand-held phone (mostly about the vertical) are what the strength and the vertical
    /// part see least.
    @discardableResult
    mutating func add(_ raw: Vector3, gravity: Vector3?, turn: Quaternion? = nil,
                      turnRateCovariance: Matrix3 = .diagonal(0)) -> Bool {
        guard isLearning, raw.isFinite, raw.length > 1 else { return false }
        offered += 1
        var g = Vector3.zero
        if let gravity, gravity.isFinite, gravity.length > 0.5 { g = (1 / gravity.length) * gravity }
        if strength > 0 {
            // Once medium, a fit this good: a sample off by several times the fit's own scatter is
            // not the Earth's field (a steel object on its way, which the pairs would also take
            // for a turn of the field).
            let tolerance = accuracy.rawValue >= MagneticFieldCalibrationAccuracy.medium.rawValue
                ? min(calibratedTolerance.upperBound, max(calibratedTolerance.lowerBound, residualTolerance * residual))
                : disturbanceTolerance
            let f = calibrated(raw)
            let refused = abs(f.length - strength) > tolerance * strength
                || (vertical != 0 && g != .zero && abs(g.dot(f) - vertical) > tolerance * strength)
            if judge(refused: refused, direction: f) {
                // The field has changed: learned again, from this sample on.
                forgetCalibration()
            } else if refused {
                return false
            }
        } else if screeningStrength > 0 {
            if abs((Self.unit * raw - screeningOffset).length - screeningStrength) > disturbanceTolerance * screeningStrength {
                refusedInARow += 1
                guard refusedInARow >= candidatePatience else { return false }
                screeningStrength = 0
            }
            refusedInARow = 0
        }
        if samples.isEmpty {
            samples = [Double](repeating: 0, count: Self.binCount * samplesPerBin * 6)
            offeredAt = [Int](repeating: 0, count: Self.binCount * samplesPerBin)
        }
        store(Self.unit * raw, g, offeredAt: offered)
        if let turn { addPair(Self.unit * raw, turn, rateCovariance: turnRateCovariance) }
        sinceFit += 1
        if sinceFit >= refitEvery {
            sinceFit = 0
            if fitsInPlace {
                refitsInPlace += 1
                fit()
            } else {
                isRefitDue = true
            }
        }
        return true
    }

    /// What a refit of a copy found: the copy after its fit, and what the fit did to its samples.
    struct Refit: Sendable {
        fileprivate var fitted: MagnetometerCalibrator
        fileprivate var effects: FitEffects
    }

    /// The refit due: clears ``isRefitDue`` and returns this calibrator as it is now, to fit
    /// (``refitted()``) off the sample path.
    mutating func takeRefit() -> MagnetometerCalibrator {
        isRefitDue = false
        return self
    }

    /// This calibrator's refit over the samples it holds now (what ``add(_:gravity:turn:turnRateCovariance:)``
    /// runs in place every ``refitEvery`` samples when ``fitsInPlace``), for ``adopt(_:)``. Changes nothing.
    func refitted() -> Refit {
        var copy = self
        let effects = copy.fit()
        return Refit(fitted: copy, effects: effects)
    }

    /// Takes what a refit of an earlier copy of this calibrator found (``takeRefit()``,
    /// ``refitted()``): the calibration, its accuracy and coverage, the candidate that screens
    /// samples; the samples taken since the copy are kept, binned again around the fit's centre
    /// when it moved it, and outliers evicted when the fit evicted its own (one pass over the
    /// samples each). Nothing else changes this calibration between the copy and now, so this is
    /// the fit in place delayed, on the samples taken meanwhile.
    mutating func adopt(_ refit: Refit) {
        let f = refit.fitted
        // A refit of a calibration forgotten since (its samples with it) is not taken.
        guard f.forgotten == forgotten else { return }
        offset = f.offset
        softIron = f.softIron
        strength = f.strength
        vertical = f.vertical
        residual = f.residual
        offsetError = f.offsetError
        coverage = f.coverage
        model = f.model
        accuracy = f.accuracy
        isSaved = f.isSaved
        if refit.effects.screened {
            screeningOffset = f.screeningOffset
            screeningStrength = f.screeningStrength
        }
        unexplainedSince = f.unexplainedSince
        if f.binCentre != binCentre { rebin(to: f.binCentre) }
        if let cut = refit.effects.droppedBefore { dropSamples(offeredBefore: cut) }
        if refit.effects.evicted { evictOutliers() }
    }

    /// Forgets the gyroscope's attitudes so far (it was restarted, or a gap broke it): no pair
    /// spans the break.
    mutating func breakPairs() {
        recentStart = 0
        recentCount = 0
    }

    /// Pairs a sample (scaled) with the newest recent one the device has turned at least
    /// ``minimumPairAngle`` from, and adds the pair's equations to ``pairInformation`` when the
    /// bias about the turn's axis is known well enough (``maximumPairRateDeviation``).
    private mutating func addPair(_ p: Vector3, _ turn: Quaternion, rateCovariance: Matrix3) {
        let span = max(pairSpan, 1)
        if recentFields.count != span {
            recentFields = [Vector3](repeating: .zero, count: span)
            recentTurns = [Quaternion](repeating: .identity, count: span)
            recentNorms = [Double](repeating: 1, count: span)
            recentStart = 0
            recentCount = 0
        }
        let turnNorm = turn.x * turn.x + turn.y * turn.y + turn.z * turn.z + turn.w * turn.w
        defer {
            let slot: Int
            if recentCount == span {
                slot = recentStart
                recentStart = recentStart + 1 == span ? 0 : recentStart + 1
            } else {
                slot = (recentStart + recentCount) % span
                recentCount += 1
            }
            recentFields[slot] = p
            recentTurns[slot] = turn
            recentNorms[slot] = turnNorm
        }
        // Turned at least the angle: |w| of the turn at most cos(angle / 2) of its norm.
        let limit = cos(minimumPairAngle / 2)
        var found: (slot: Int, turn: Quaternion)?
        // The turn's w alone first (the product's w, computed as ``Quaternion/multiplied(by:)``
        // does), against its norm from the factors' (a product's norm is theirs): only a turn
        // within 10⁻⁹ of the limit is multiplied out to decide, so the pair found is the one the
        // full products would find.
        let screen = limit * limit * turnNorm
        let screenable = screen.isNormal && turnNorm.isFinite
        var slot = recentCount == 0 ? 0 : (recentStart + recentCount - 1) % span
        for _ in 0..<recentCount {
            let r = recentTurns[slot].conjugate
            let w = r.w * turn.w - r.x * turn.x - r.y * turn.y - r.z * turn.z
            let bound = screen * recentNorms[slot]
            if screenable, bound.isNormal, w * w > bound * (1 + 1e-9) {
                // Clearly not turned enough.
            } else if screenable, bound.isNormal, w * w < bound * (1 - 1e-9) {
                found = (slot, r.multiplied(by: turn))
                break
            } else {
                let d = r.multiplied(by: turn)
                if abs(d.w) <= limit * d.norm { found = (slot, d); break }
            }
            slot = slot == 0 ? span - 1 : slot - 1
        }
        // d takes device i's axes to device j's: a fixed vector seen at j is dᵀ of it seen at i.
        guard let (k, d) = found else { return }
        let axis = Vector3(d.x, d.y, d.z)
        let limit2 = maximumPairRateDeviation * maximumPairRateDeviation
        guard axis.length > 0, axis.dot(rateCovariance * axis) <= limit2 * axis.dot(axis) else { return }
        let q = recentFields[k]
        func back(_ v: Vector3) -> Vector3 { d.inverseRotate(v) }
        // The residual W·p − dᵀ·W·q − (I − dᵀ)·b, one column per entry of z (the symmetric
        // matrix's entries W11, W22, W33, W12, W13, W23 applied to p and q, then b's axes).
        let columns = (
            Vector3(p.x, 0, 0) - back(Vector3(q.x, 0, 0)),
            Vector3(0, p.y, 0) - back(Vector3(0, q.y, 0)),
            Vector3(0, 0, p.z) - back(Vector3(0, 0, q.z)),
            Vector3(p.y, p.x, 0) - back(Vector3(q.y, q.x, 0)),
            Vector3(p.z, 0, p.x) - back(Vector3(q.z, 0, q.x)),
            Vector3(0, p.z, p.y) - back(Vector3(0, q.z, q.y)),
            back(Vector3(1, 0, 0)) - Vector3(1, 0, 0),
            back(Vector3(0, 1, 0)) - Vector3(0, 1, 0),
            back(Vector3(0, 0, 1)) - Vector3(0, 0, 1)
        )
        if pairInformation.isEmpty { pairInformation = [Double](repeating: 0, count: 81) }
        let keep = 1 - 1 / max(pairMemory, 1)
        withUnsafeBytes(of: columns) { raw in
            let c = raw.bindMemory(to: Vector3.self)
            pairInformation.withUnsafeMutableBufferPointer { n in
                for a in 0..<9 {
                    for b in a..<9 { n[a * 9 + b] = keep * n[a * 9 + b] + c[a].dot(c[b]) }
                }
            }
        }
        pairCount = keep * pairCount + 1
    }

    /// The entry (a, b) of the pairs' normal matrix (its upper half holds both).
    private func pairEntry(_ a: Int, _ b: Int) -> Double {
        a <= b ? pairInformation[a * 9 + b] : pairInformation[b * 9 + a]
    }

    /// The slot (index into `offeredAt`; times 6 into `samples`) of a bin's `k`th oldest sample: a
    /// full bin's ring starts at its next slot.
    private func slot(_ bin: Int, oldest k: Int) -> Int {
        bin * samplesPerBin + (binCounts[bin] == samplesPerBin ? (binNext[bin] + k) % samplesPerBin : k)
    }

    /// Stores a sample (scaled) in its bin, replacing the bin's oldest when it is full.
    private mutating func store(_ p: Vector3, _ g: Vector3, offeredAt time: Int) {
        let bin = Self.bin(of: p - binCentre)
        offeredAt[bin * samplesPerBin + binNext[bin]] = time
        let slot = (bin * samplesPerBin + binNext[bin]) * 6
        samples[slot] = p.x; samples[slot + 1] = p.y; samples[slot + 2] = p.z
        samples[slot + 3] = g.x; samples[slot + 4] = g.y; samples[slot + 5] = g.z
        binNext[bin] = (binNext[bin] + 1) % samplesPerBin
        binCounts[bin] = min(binCounts[bin] + 1, samplesPerBin)
    }

    /// Bins the samples again around `centre` (scaled), when it is far from the one they were
    /// binned around (the first candidate fits move it from zero to the hard-iron offset).
    @discardableResult
    private mutating func rebin(around centre: Vector3, strength: Double) -> Bool {
        guard !samples.isEmpty, (centre - binCentre).length > 0.1 * strength else { return false }
        rebin(to: centre)
        return true
    }

    /// Bins the samples again around `centre` (scaled).
    private mutating func rebin(to centre: Vector3) {
        binCentre = centre
        guard !samples.isEmpty else { return }
        var all: [(Vector3, Vector3, Int)] = []
        for bin in 0..<Self.binCount {
            // Oldest first, so that each bin keeps its newest.
            for k in 0..<binCounts[bin] {
                let i = slot(bin, oldest: k), s = i * 6
                all.append((Vector3(samples[s], samples[s + 1], samples[s + 2]), Vector3(samples[s + 3], samples[s + 4], samples[s + 5]), offeredAt[i]))
            }
        }
        all.sort { $0.2 < $1.2 }
        samplesRevisited += all.count
        for i in binCounts.indices { binCounts[i] = 0; binNext[i] = 0 }
        for (p, g, t) in all { store(p, g, offeredAt: t) }
    }

    /// The direction bin of a vector.
    static func bin(of v: Vector3) -> Int {
        let a = Vector3(abs(v.x), abs(v.y), abs(v.z))
        let face: Int, u: Double, w: Double, d: Double
        if a.x >= a.y && a.x >= a.z { face = v.x >= 0 ? 0 : 1; (u, w, d) = (v.y, v.z, a.x) }
        else if a.y >= a.z { face = v.y >= 0 ? 2 : 3; (u, w, d) = (v.x, v.z, a.y) }
        else { face = v.z >= 0 ? 4 : 5; (u, w, d) = (v.x, v.y, a.z) }
        guard d > 0 else { return 0 }
        func cell(_ c: Double) -> Int { min(5, max(0, Int((c / d + 1) * 3))) }
        return face * 36 + cell(u) * 6 + cell(w)
    }

    /// The number of direction bins: a cube's faces, each in 6 × 6 cells (about 15° each).
    static let binCount = 216

    // MARK: Fitting

    /// One candidate calibration in the scaled units.
    private struct Fit {
        var offset: Vector3
        var softIron: Matrix3
        var strength: Double
        var vertical: Double
        var model: Model
        var residual = 1.0
        /// The largest standard error of the offset's components (scaled units; infinite when unknown).
        var offsetError = Double.infinity
    }

    /// Calls `body` with each stored sample (scaled raw, unit gravity or zero).
    private func forEachSample(_ body: (Vector3, Vector3) -> Void) {
        guard !samples.isEmpty else { return }
        for bin in 0..<Self.binCount {
            for i in 0..<binCounts[bin] {
                let s = (bin * samplesPerBin + i) * 6
                body(Vector3(samples[s], samples[s + 1], samples[s + 2]), Vector3(samples[s + 3], samples[s + 4], samples[s + 5]))
            }
        }
    }

    /// What a fit did besides the calibration: evicted outliers, set the screening candidate.
    fileprivate struct FitEffects: Sendable {
        var evicted = false
        var screened = false
        /// The samples offered before this were dropped (``fieldChangeMemory``).
        var droppedBefore: Int?
    }

    @discardableResult
    private mutating func fit() -> FitEffects {
        var effects = FitEffects()
        // Bins covered never fall, but when the samples are binned around a new centre (outliers
        // dropped and bins overwritten do not undo a direction seen).
        coverage = max(coverage, binCounts.filter { $0 >= 3 }.count)
        guard coverage >= 4 else { return effects }
        var withGravity = 0, total = 0
        forEachSample { _, g in
            total += 1
            if g.x != 0 || g.y != 0 || g.z != 0 { withGravity += 1 }
        }
        var candidate: Fit?
        let gravity = 2 * withGravity >= total
        if gravity {
            candidate = gravityFit()
        } else {
            candidate = linearSphereFit()
        }
        guard var c = candidate, Self.isPlausible(c) else {
            // What the calibration in use puts far off (a disturbance learned while it was
            // rough) goes, so that it does not keep every later fit implausible.
            evictOutliers()
            effects.evicted = true
            return effects
        }
        if model == .none, c.offsetError < 2 * Self.unit, (20 * Self.unit...70 * Self.unit).contains(c.strength) {
            screeningOffset = c.offset
            screeningStrength = c.strength
            effects.screened = true
        }
        // Until the first accepted fit, the samples follow the candidate's centre.
        if model == .none, rebin(around: c.offset, strength: c.strength) { coverage = binCounts.filter { $0 >= 3 }.count }
        if gravity {
            // From 10 bins, and the offset known to within 2 µT.
            guard coverage >= 10, c.offsetError < 2 * Self.unit else { return effects }
        } else {
            // A sphere from 27 bins, an ellipsoid from ``ellipsoidCoverage``.
            guard coverage >= 27 else { return effects }
            if coverage >= ellipsoidCoverage, let e = linearEllipsoidFit(), Self.isPlausible(e) { c = e }
        }
        c.residual = residual(of: c)
        // With gravity, the offset's standard error is only as good as the model: a sphere fitted
        // to a field the soft iron stretches by 10 % puts the offset µT off while the error says
        // half a µT. So `medium` waits for the samples to determine the matrix.
        let determined = c.model == .ellipsoid
        let identity = identityFit(gravity: gravity)
        let fitScatter = consistency(of: c), rawScatter = identity.map { consistency(of: $0) } ?? .infinity
        // Neither explains the samples (a fit that went astray on a field that is far from a
        // sphere, as a magnet fixed to the device makes it): nothing changes, and no sample is
        // dropped against either; the next fit has more.
        if fitScatter > Self.unexplainedScatter, rawScatter > Self.unexplainedScatter {
            // For long: the field has changed since the older samples; only the newest stay.
            let since = unexplainedSince ?? offered
            unexplainedSince = since
            if offered - since >= fieldChangeMemory {
                let cut = offered - fieldChangeMemory
                dropSamples(offeredBefore: cut)
                effects.droppedBefore = cut
            }
            return effects
        }
        unexplainedSince = nil
        // No distortion at all, when that explains the samples as well: a fit that is no better
        // than the raw field (by Akaike's criterion over the bins covered, the fit's offset and
        // matrix counting as parameters) only adds its own errors to every sample. A matrix the
        // fit moved from identity counts whether or not the samples determine it yet.
        if let identity {
            let parameters = c.softIron != .diagonal(1) ? 8.0 : 3.0
            if fitScatter > 0, Double(coverage) * log(rawScatter * rawScatter / (fitScatter * fitScatter)) < 2 * parameters {
                c = Fit(offset: .zero, softIron: .diagonal(1), strength: identity.strength, vertical: identity.vertical,
                        model: .sphere, residual: residual(of: identity), offsetError: c.offsetError)
            }
        }
        if isSaved {
            // A saved calibration stays while it matches the samples and no fit covers as much.
            let current = Fit(offset: Self.unit * offset, softIron: softIron, strength: Self.unit * strength,
                              vertical: Self.unit * vertical, model: model)
            let savedResidual = self.residual(of: current)
            if savedResidual < 0.03 && coverage < savedCoverage {
                residual = savedResidual
                return effects
            }
            isSaved = false
        }
        offset = (1 / Self.unit) * c.offset
        softIron = c.softIron
        strength = c.strength / Self.unit
        vertical = c.vertical / Self.unit
        model = c.model
        residual = c.residual
        offsetError = c.offsetError / Self.unit
        evictOutliers()
        effects.evicted = true
        let full = model == .ellipsoid
        if gravity {
            // A level reached is kept while the residual stays under its bound and the offset's
            // error within twice its bound (the estimates jitter from fit to fit).
            let reached = accuracy
            func margin(_ level: MagneticFieldCalibrationAccuracy) -> Double { reached.rawValue >= level.rawValue ? 2 : 1 }
            accuracy = coverage >= 16 && offsetError < 0.5 * margin(.high) && residual < 0.02 && (full || coverage >= 90) ? .high
                : (coverage >= 12 && (determined || reached.rawValue >= MagneticFieldCalibrationAccuracy.medium.rawValue)
                   && offsetError < 1 * margin(.medium) && residual < 0.04 ? .medium : .low)
        } else {
            accuracy = coverage >= 90 && residual < 0.02 ? .high : (coverage >= 45 && residual < 0.04 ? .medium : .low)
        }
        return effects
    }

    /// Drops the stored samples that the fit puts more than 5 % of the strength off (a
    /// disturbance that got in while the fit was rough), so that they do not pull later fits.
    private mutating func evictOutliers() {
        guard !samples.isEmpty, strength > 0 else { return }
        let c = Self.unit * offset, f = Self.unit * strength, d = Self.unit * vertical
        for bin in 0..<Self.binCount {
            samplesRevisited += binCounts[bin]
            var kept = 0
            for i in 0..<binCounts[bin] {
                let s = (bin * samplesPerBin + i) * 6
                let p = Vector3(samples[s], samples[s + 1], samples[s + 2]), g = Vector3(samples[s + 3], samples[s + 4], samples[s + 5])
                let field = softIron * (p - c)
                let off = abs(field.length - f) > 0.05 * f || (d != 0 && g != .zero && abs(g.dot(field) - d) > 0.05 * f)
                if off { continue }
                if kept != i {
                    let k = (bin * samplesPerBin + kept) * 6
                    for j in 0..<6 { samples[k + j] = samples[s + j] }
                    offeredAt[bin * samplesPerBin + kept] = offeredAt[bin * samplesPerBin + i]
                }
                kept += 1
            }
            if kept != binCounts[bin] {
                binCounts[bin] = kept
                binNext[bin] = kept % samplesPerBin
            }
        }
    }

    /// Counts a sample the calibration in use judged; true when, over the last
    /// ``fieldChangeMemory`` judged, it refused three in four, from at least
    /// ``minimumChangedCoverage`` directions.
    private mutating func judge(refused: Bool, direction: Vector3) -> Bool {
        judged += 1
        if refused {
            judgedRefused += 1
            refusedBins.insert(Self.bin(of: direction))
        }
        guard judged >= fieldChangeMemory else { return false }
        defer {
            judged = 0
            judgedRefused = 0
            refusedBins = BinSet()
        }
        return 4 * judgedRefused >= 3 * judged && refusedBins.count >= Self.minimumChangedCoverage
    }

    /// Back to no calibration, nothing stored and no pairs: learned again as from the start.
    private mutating func forgetCalibration() {
        offset = .zero
        softIron = .diagonal(1)
        strength = 0
        vertical = 0
        residual = 1
        offsetError = .infinity
        coverage = 0
        model = .none
        accuracy = .uncalibrated
        isSaved = false
        savedCoverage = 0
        for i in binCounts.indices { binCounts[i] = 0; binNext[i] = 0 }
        binCentre = .zero
        screeningOffset = .zero
        screeningStrength = 0
        refusedInARow = 0
        pairInformation = []
        pairCount = 0
        unexplainedSince = nil
        forgotten += 1
    }

    /// A set of direction bins (``binCount`` of them), without allocating.
    private struct BinSet: Hashable, Sendable {
        private var words = SIMD4<UInt64>(repeating: 0)
        mutating func insert(_ bin: Int) { words[bin / 64] |= 1 << UInt64(bin % 64) }
        var count: Int { words[0].nonzeroBitCount + words[1].nonzeroBitCount + words[2].nonzeroBitCount + words[3].nonzeroBitCount }
    }

    /// Drops the stored samples offered before `cut` (an ``offered`` count); the bins covered are
    /// counted again.
    private mutating func dropSamples(offeredBefore cut: Int) {
        guard !samples.isEmpty else { return }
        let perBin = samplesPerBin
        withUnsafeTemporaryAllocation(of: Double.self, capacity: perBin * 7) { kept in
            for bin in 0..<Self.binCount where binCounts[bin] > 0 {
                samplesRevisited += binCounts[bin]
                // Oldest first, the newest kept in order.
                let count = binCounts[bin]
                var n = 0
                for k in 0..<count {
                    let i = slot(bin, oldest: k)
                    guard offeredAt[i] >= cut else { continue }
                    for j in 0..<6 { kept[n * 7 + j] = samples[i * 6 + j] }
                    kept[n * 7 + 6] = Double(offeredAt[i])
                    n += 1
                }
                guard n != count else { continue }
                for k in 0..<n {
                    let i = bin * perBin + k
                    for j in 0..<6 { samples[i * 6 + j] = kept[k * 7 + j] }
                    offeredAt[i] = Int(kept[k * 7 + 6])
                }
                binCounts[bin] = n
                binNext[bin] = n % perBin
            }
        }
        coverage = binCounts.reduce(0) { $0 + ($1 >= 3 ? 1 : 0) }
    }

    /// The coverage a saved calibration was fitted with (see ``init(text:)``).
    private var savedCoverage = 0

    private static func isPlausible(_ f: Fit) -> Bool {
        guard f.offset.isFinite, f.strength.isFinite, f.vertical.isFinite else { return false }
        // Scaled units: 1 = 50 µT.
        guard f.strength > 0.1, f.strength < 10, f.offset.length < 40 else { return false }
        guard let e = symmetricEigen(f.softIron) else { return false }
        let lo = min(e.values.x, e.values.y, e.values.z), hi = max(e.values.x, e.values.y, e.values.z)
        return lo > 0 && hi / lo < 2
    }

    /// The raw field taken as calibrated (no offset, `W` = identity): its mean strength and,
    /// with gravity, its mean vertical part.
    private func identityFit(gravity: Bool) -> Fit? {
        var strength = 0.0, vertical = 0.0, n = 0.0, nv = 0.0
        forEachSample { p, g in
            strength += p.length
            n += 1
            if gravity, g.x != 0 || g.y != 0 || g.z != 0 { vertical += g.dot(p); nv += 1 }
        }
        guard n > 0, strength > 0 else { return nil }
        return Fit(offset: .zero, softIron: .diagonal(1), strength: strength / n, vertical: nv > 0 ? vertical / nv : 0, model: .sphere)
    }

    /// The RMS over the samples of the calibrated strength's relative difference from `F` and,
    /// where the fit has a vertical part and the sample a gravity, of the vertical part's from `D`
    /// (relative to `F`): how well a fit explains the samples, for comparing two.
    private func consistency(of f: Fit) -> Double {
        var sum = 0.0, n = 0.0
        forEachSample { p, g in
            let v = f.softIron * (p - f.offset)
            let r = v.length / f.strength - 1
            sum += r * r
            n += 1
            if f.vertical != 0, g.x != 0 || g.y != 0 || g.z != 0 {
                let d = (g.dot(v) - f.vertical) / f.strength
                sum += d * d
                n += 1
            }
        }
        return (sum / max(n, 1)).squareRoot()
    }

    /// The RMS relative difference of the calibrated strengths from the fit's.
    private func residual(of f: Fit) -> Double {
        var sum = 0.0, n = 0.0
        forEachSample { p, _ in
            let r = (f.softIron * (p - f.offset)).length / f.strength - 1
            sum += r * r
            n += 1
        }
        return (sum / max(n, 1)).squareRoot()
    }

    /// `|p − c|² = r²` as `2p·c + k = |p|²` (k = r² − |c|²).
    private func linearSphereFit() -> Fit? {
        var n = [Double](repeating: 0, count: 16), r = [Double](repeating: 0, count: 4)
        forEachSample { p, _ in
            let phi = [2 * p.x, 2 * p.y, 2 * p.z, 1]
            let t = p.dot(p)
            for i in 0..<4 {
                r[i] += phi[i] * t
                for j in 0..<4 { n[i * 4 + j] += phi[i] * phi[j] }
            }
        }
        guard let th = Self.solve(n, r, size: 4) else { return nil }
        let c = Vector3(th[0], th[1], th[2])
        let k = th[3] + c.dot(c)
        guard k > 0 else { return nil }
        return Fit(offset: c, softIron: .diagonal(1), strength: k.squareRoot(), vertical: 0, model: .sphere)
    }

    /// The general ellipsoid `pᵀAp + 2bᵀp + j = 0` with `A`'s trace 3:
    /// `α(x²−z²) + β(y²−z²) + 2d·xy + 2e·xz + 2f·yz + 2g·x + 2h·y + 2i·z + j = −(x²+y²+z²)`,
    /// `A = [[1+α, d, e], [d, 1+β, f], [e, f, 1−α−β]]`.
    private func linearEllipsoidFit() -> Fit? {
        var n = [Double](repeating: 0, count: 81), r = [Double](repeating: 0, count: 9)
        forEachSample { p, _ in
            let (x, y, z) = (p.x, p.y, p.z)
            let phi = [x * x - z * z, y * y - z * z, 2 * x * y, 2 * x * z, 2 * y * z, 2 * x, 2 * y, 2 * z, 1]
            let t = -(x * x + y * y + z * z)
            for i in 0..<9 {
                r[i] += phi[i] * t
                for j in 0..<9 { n[i * 9 + j] += phi[i] * phi[j] }
            }
        }
        guard let th = Self.solve(n, r, size: 9) else { return nil }
        let a = Matrix3(r0: Vector3(1 + th[0], th[2], th[3]), r1: Vector3(th[2], 1 + th[1], th[4]),
                        r2: Vector3(th[3], th[4], 1 - th[0] - th[1]))
        guard let inverse = a.inverse else { return nil }
        let c = -(inverse * Vector3(th[5], th[6], th[7]))
        let k = c.dot(a * c) - th[8]
        guard k > 0, let e = Self.symmetricEigen((1 / k) * a) else { return nil }
        let v = e.values
        guard v.x > 0, v.y > 0, v.z > 0 else { return nil }
        // (p − c)ᵀ Q (p − c) = 1 with Q = A/k: W = Q^½ · det(Q)^−⅙, F = det(Q)^−⅙.
        let f = pow(v.x * v.y * v.z, -1.0 / 6)
        let root = e.vectors.scaledColumns(Vector3(v.x.squareRoot(), v.y.squareRoot(), v.z.squareRoot())) * e.vectors.transposed
        return Fit(offset: c, softIron: f * root, strength: f, vertical: 0, model: .ellipsoid)
    }

    /// Gauss–Newton over (c, W's five free entries, F, D) on `|W(p − c)| − F` and
    /// `ĝ·W(p − c) − D`; first with W fixed at identity, then with W free, kept when
    /// the samples determine it (its entries' standard errors under ``softIronUncertainty``).
    private func gravityFit() -> Fit? {
        var start: Fit
        if model != .none, strength > 0 {
            // From the last offset, with W = identity: a matrix is only ever what this fit finds.
            start = Fit(offset: Self.unit * offset, softIron: .diagonal(1), strength: Self.unit * strength, vertical: Self.unit * vertical, model: .sphere)
        } else {
            guard let s = linearSphereFit() else { return nil }
            start = s
        }
        if start.vertical == 0 {
            var sum = 0.0, n = 0.0
            forEachSample { p, g in
                if g.x != 0 || g.y != 0 || g.z != 0 { sum += g.dot(start.softIron * (p - start.offset)); n += 1 }
            }
            start.vertical = sum / max(n, 1)
        }
        guard var fixed = gaussNewton(from: start, freeSoftIron: false) else { return nil }
        fixed.fit.offsetError = fixed.offsetError
        // The matrix also needs the offset's standard error under 1 µT with it.
        // W free, drawn towards identity as if known beforehand to ±``softIronPrior``: what the
        // samples do not determine stays a sphere's.
        guard let free = gaussNewton(from: fixed.fit, freeSoftIron: true, prior: fixed.variance / (softIronPrior * softIronPrior)),
              free.offsetError < 2 * Self.unit else {
            return fixed.fit
        }
        var f = free.fit
        // Once determined, the matrix stays while its errors are within twice the bound.
        f.model = free.softIronError < softIronUncertainty * (model == .ellipsoid ? 2 : 1) ? .ellipsoid : .sphere
        f.offsetError = free.offsetError
        return f
    }

    /// Iterates from `start`; returns the fit and the largest standard error of W's free entries.
    private func gaussNewton(from start: Fit, freeSoftIron: Bool, prior: Double = 0)
        -> (fit: Fit, softIronError: Double, offsetError: Double, variance: Double)? {
        // Parameters: 0–2 offset, 3–7 W (22, 33, 12, 13, 23; W11 = trace − W22 − W33), 8 F, 9 D.
        let active = freeSoftIron ? Array(0..<10) : [0, 1, 2, 8, 9]
        let m = active.count
        let trace = start.softIron.trace
        var x = [start.offset.x, start.offset.y, start.offset.z, start.softIron.r1.y, start.softIron.r2.z,
                 start.softIron.r0.y, start.softIron.r0.z, start.softIron.r1.z, start.strength, start.vertical]
        func matrix(_ x: [Double]) -> Matrix3 {
            Matrix3(r0: Vector3(trace - x[3] - x[4], x[5], x[6]), r1: Vector3(x[5], x[3], x[7]), r2: Vector3(x[6], x[7], x[4]))
        }
        let identity = [trace / 3, trace / 3, 0, 0, 0]  // W22, W33, W12, W13, W23 of a sphere
        // The gyroscope's pairs: z = (W11, W22, W33, W12, W13, W23, b = W·c) and its Jacobian
        // in x. A pair's three equations weigh half a sample's (their noise is two samples').
        let usesPairs = pairCount >= 20
        let pairWeight = 0.5
        func pairState(_ x: [Double]) -> [Double] {
            let w = matrix(x), b = w * Vector3(x[0], x[1], x[2])
            return [w.r0.x, x[3], x[4], x[5], x[6], x[7], b.x, b.y, b.z]
        }
        func pairJacobian(_ x: [Double]) -> [[Double]] {  // 9 rows × 10 parameters
            var j = [[Double]](repeating: [Double](repeating: 0, count: 10), count: 9)
            j[0][3] = -1; j[0][4] = -1
            j[1][3] = 1; j[2][4] = 1; j[3][5] = 1; j[4][6] = 1; j[5][7] = 1
            let w = matrix(x), c = Vector3(x[0], x[1], x[2])
            let rows = [w.r0, w.r1, w.r2]
            let dW: [Vector3] = [Vector3(-c.x, c.y, 0), Vector3(-c.x, 0, c.z), Vector3(c.y, c.x, 0), Vector3(c.z, 0, c.x), Vector3(0, c.z, c.y)]
            for l in 0..<3 {
                j[6 + l][0] = rows[l].x; j[6 + l][1] = rows[l].y; j[6 + l][2] = rows[l].z
                for k in 0..<5 { j[6 + l][3 + k] = l == 0 ? dW[k].x : l == 1 ? dW[k].y : dW[k].z }
            }
            return j
        }
        // One pass over the stored samples at `x`: the cost (the squared residuals, then the
        // prior's and the pairs' terms) and the normal equations there, `n` (m × m) and `rhs`
        // (−Jᵀr), `rows` the residuals counted. Flat loops: this is where a refit spends its time.
        func evaluate(_ x: [Double], _ n: inout [Double], _ rhs: inout [Double], _ rows: inout Int) -> Double {
            for i in n.indices { n[i] = 0 }
            for i in rhs.indices { rhs[i] = 0 }
            var counted = 0
            let w = matrix(x), c = Vector3(x[0], x[1], x[2])
            let strength = x[8], vertical = x[9]
            let perBin = samplesPerBin
            var s = 0.0
            samples.withUnsafeBufferPointer { sp in
                binCounts.withUnsafeBufferPointer { counts in
                    n.withUnsafeMutableBufferPointer { np in
                        rhs.withUnsafeMutableBufferPointer { rp in
                            withUnsafeTemporaryAllocation(of: Double.self, capacity: 20) { buffer in
                                // The row's Jacobian over all ten parameters, then its active entries.
                                let full = buffer.baseAddress!, j = full + 10
                                func accumulate(_ r: Double) {
                                    if freeSoftIron {
                                        for a in 0..<10 { j[a] = full[a] }
                                    } else {
                                        j[0] = full[0]; j[1] = full[1]; j[2] = full[2]; j[3] = full[8]; j[4] = full[9]
                                    }
                                    for a in 0..<m {
                                        let ja = j[a]
                                        rp[a] -= ja * r
                                        for b in a..<m { np[a * m + b] += ja * j[b] }
                                    }
                                    counted += 1
                                }
                                func row(_ dir: Vector3, _ u: Vector3, _ r: Double, norm: Bool) {
                                    let dc = -(w * dir)  // W symmetric: ∂(dir·W(p−c))/∂c = −W·dir
                                    full[0] = dc.x; full[1] = dc.y; full[2] = dc.z
                                    // ∂(dir·f)/∂(W22, W33, W12, W13, W23), W11 = trace − W22 − W33.
                                    full[3] = dir.y * u.y - dir.x * u.x
                                    full[4] = dir.z * u.z - dir.x * u.x
                                    full[5] = dir.x * u.y + dir.y * u.x
                                    full[6] = dir.x * u.z + dir.z * u.x
                                    full[7] = dir.y * u.z + dir.z * u.y
                                    full[8] = norm ? -1 : 0
                                    full[9] = norm ? 0 : -1
                                    accumulate(r)
                                }
                                guard !sp.isEmpty else { return }
                                for bin in 0..<Self.binCount {
                                    var k = bin * perBin * 6
                                    for _ in 0..<counts[bin] {
                                        let p = Vector3(sp[k], sp[k + 1], sp[k + 2]), g = Vector3(sp[k + 3], sp[k + 4], sp[k + 5])
                                        k += 6
                                        let u = p - c
                                        let f = w * u
                                        let len = f.length
                                        let r1 = len - strength
                                        s += r1 * r1
                                        let hasGravity = g.x != 0 || g.y != 0 || g.z != 0
                                        var r2 = 0.0
                                        if hasGravity {
                                            r2 = g.dot(f) - vertical
                                            s += r2 * r2
                                        }
                                        guard len > 1e-9 else { continue }
                                        row((1 / len) * f, u, r1, norm: true)
                                        if hasGravity { row(g, u, r2, norm: false) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if freeSoftIron {
                for k in 3...7 {
                    s += prior * (x[k] - identity[k - 3]) * (x[k] - identity[k - 3])
                    n[k * m + k] += prior
                    rhs[k] -= prior * (x[k] - identity[k - 3])
                }
            }
            if usesPairs {
                let z = pairState(x), j = pairJacobian(x)
                for a in 0..<9 { for b in 0..<9 { s += pairWeight * z[a] * pairEntry(a, b) * z[b] } }
                // N·J (9 × active) and N·z.
                var nz = [Double](repeating: 0, count: 9)
                var nj = [[Double]](repeating: [Double](repeating: 0, count: m), count: 9)
                for a in 0..<9 {
                    for b in 0..<9 {
                        let v = pairEntry(a, b)
                        guard v != 0 else { continue }
                        nz[a] += v * z[b]
                        for k in 0..<m { nj[a][k] += v * j[b][active[k]] }
                    }
                }
                for k in 0..<m {
                    for a in 0..<9 { rhs[k] -= pairWeight * j[a][active[k]] * nz[a] }
                    for l in k..<m {
                        var v = 0.0
                        for a in 0..<9 { v += j[a][active[k]] * nj[a][l] }
                        n[k * m + l] += pairWeight * v
                    }
                }
                counted += Int(3 * pairCount)
            }
            for a in 0..<m { for b in 0..<a { n[a * m + b] = n[b * m + a] } }
            rows = counted
            return s
        }
        // The normal equations at x and at the step tried: an accepted step's pass gives both its
        // cost and the next iteration's equations.
        var n = [Double](repeating: 0, count: m * m), rhs = [Double](repeating: 0, count: m)
        var tried = n, triedRhs = rhs
        var rows = 0, triedRows = 0
        var current = evaluate(x, &n, &rhs, &rows)
        var damping = 1e-6
        for _ in 0..<12 {
            var improved = false
            for _ in 0..<6 {
                var damped = n
                for a in 0..<m { damped[a * m + a] *= 1 + damping }
                guard let step = Self.solve(damped, rhs, size: m) else { return nil }
                var y = x
                for a in 0..<m { y[active[a]] += step[a] }
                let c = evaluate(y, &tried, &triedRhs, &triedRows)
                if c.isFinite && c < current {
                    let gain = current - c
                    x = y
                    current = c
                    swap(&n, &tried)
                    swap(&rhs, &triedRhs)
                    rows = triedRows
                    damping = max(damping / 10, 1e-9)
                    improved = gain > 1e-12 * max(current, 1e-12)
                    break
                }
                damping *= 10
            }
            if !improved { break }
        }
        let fit = Fit(offset: Vector3(x[0], x[1], x[2]), softIron: matrix(x), strength: x[8], vertical: x[9],
                      model: freeSoftIron ? .ellipsoid : start.model == .ellipsoid || start.model == .axisAligned ? start.model : .sphere)
        // Standard errors: σ² (JᵀJ)⁻¹ on the diagonal, σ² the residual variance (n is at x).
        let variance = current / Double(max(rows - m, 1))
        func standardError(_ k: Int) -> Double {
            var e = [Double](repeating: 0, count: m)
            e[k] = 1
            guard let column = Self.solve(n, e, size: m), column[k] > 0 else { return .infinity }
            return (variance * column[k]).squareRoot()
        }
        let offsetError = max(standardError(0), standardError(1), standardError(2))
        guard freeSoftIron else { return (fit, .infinity, offsetError, variance) }
        let worst = (3...7).map(standardError).max() ?? .infinity
        // W is scaled to determinant 1 (F with it).
        guard let e = Self.symmetricEigen(fit.softIron) else { return nil }
        let det = e.values.x * e.values.y * e.values.z
        guard det > 0 else { return nil }
        let s = pow(det, -1.0 / 3)
        var scaled = fit
        scaled.softIron = s * fit.softIron
        scaled.strength = s * fit.strength
        scaled.vertical = s * fit.vertical
        return (scaled, worst, offsetError, variance)
    }

    // MARK: Persistence

    /// The first line of a calibration file of the current version.
    static let header = "iiomotion-magnetometer-calibration 2"

    /// The calibration as text, `key values` lines after ``header``: `model` (sphere,
    /// axis-aligned, ellipsoid), `offset` (µT, x y z), `soft-iron` (W's rows, 9 numbers),
    /// `strength` and `vertical` (µT), `residual`, `coverage` (bins), `lag` (seconds, when
    /// measured), then the `extra` lines given (the store adds the device and its mount matrix).
    /// What ``init(text:)`` reads back.
    func text(extra: [String] = []) -> String {
        let w = softIron
        var lines = [Self.header,
                     "model \(model.rawValue)",
                     "offset \(offset.x) \(offset.y) \(offset.z)",
                     "soft-iron \(w.r0.x) \(w.r0.y) \(w.r0.z) \(w.r1.x) \(w.r1.y) \(w.r1.z) \(w.r2.x) \(w.r2.y) \(w.r2.z)",
                     "strength \(strength)",
                     "vertical \(vertical)",
                     "residual \(residual)",
                     "coverage \(coverage)"]
        if let lag { lines.append("lag \(lag)") }
        lines += extra
        return lines.joined(separator: "\n") + "\n"
    }

    /// Why a text is not a calibration.
    enum ReadFailure: Error, Sendable, Hashable, CustomStringConvertible {
        /// Not a calibration file of any version.
        case notACalibration
        /// A calibration file of a version this library does not know.
        case unknownVersion(String)
        /// A calibration file whose values are missing, not numbers or out of range.
        case invalid(String)

        var description: String {
            switch self {
            case .notACalibration: "it is not an IIOMotion magnetometer calibration"
            case .unknownVersion(let v): "it is of version \(v), which this version of IIOMotion does not read"
            case .invalid(let why): "it is damaged (\(why))"
            }
        }
    }

    /// A saved calibration (see ``text(extra:)``; also version 1, one line `iiomotion-magnetometer-calibration-1`
    /// then offset, per-axis scale, strength, residual, coverage), starting at most at
    /// ``MagneticFieldCalibrationAccuracy/medium``; nil for anything else.
    init?(text: String) {
        guard case .success(let c) = Self.read(text) else { return nil }
        self = c
    }

    /// A saved calibration and the values of its other keys, or why the text is not one.
    static func read(_ text: String) -> Result<MagnetometerCalibrator, ReadFailure> {
        let lines = text.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        guard let first = lines.first, !first.isEmpty else { return .failure(.notACalibration) }
        var c = MagnetometerCalibrator()
        if first[0] == "iiomotion-magnetometer-calibration-1" {
            let v = first.dropFirst().compactMap { Double($0) }
            guard first.count == 10, v.count == 9, v.allSatisfy(\.isFinite) else { return .failure(.invalid("version 1 needs 9 numbers")) }
            guard v[3] > 0, v[4] > 0, v[5] > 0, v[6] > 0 else { return .failure(.invalid("a scale or the strength is not positive")) }
            c.offset = Vector3(v[0], v[1], v[2])
            // Version 1 scaled so that the geometric mean of the radii is the strength: W = diag(scale).
            c.softIron = Matrix3(r0: Vector3(v[3], 0, 0), r1: Vector3(0, v[4], 0), r2: Vector3(0, 0, v[5]))
            c.strength = v[6]
            c.residual = v[7]
            c.coverage = Int(v[8])
            c.model = .axisAligned
        } else {
            guard first.count == 2, first[0] == "iiomotion-magnetometer-calibration" else { return .failure(.notACalibration) }
            guard first[1] == "2" else { return .failure(.unknownVersion(first[1])) }
            var values: [String: [String]] = [:]
            for l in lines.dropFirst() where !l.isEmpty { values[l[0]] = Array(l.dropFirst()) }
            func numbers(_ key: String, _ count: Int) -> [Double]? {
                guard let v = values[key], v.count == count else { return nil }
                let d = v.compactMap { Double($0) }
                return d.count == count && d.allSatisfy(\.isFinite) ? d : nil
            }
            guard let modelName = values["model"]?.first, let model = Model(rawValue: modelName), model != .none else {
                return .failure(.invalid("no known model"))
            }
            guard let o = numbers("offset", 3) else { return .failure(.invalid("no offset of 3 numbers")) }
            guard let w = numbers("soft-iron", 9) else { return .failure(.invalid("no soft-iron matrix of 9 numbers")) }
            guard let s = numbers("strength", 1), s[0] > 0 else { return .failure(.invalid("no positive strength")) }
            guard let r = numbers("residual", 1), r[0] >= 0 else { return .failure(.invalid("no residual")) }
            guard let k = numbers("coverage", 1), k[0] >= 0, k[0] <= Double(binCount) else { return .failure(.invalid("no coverage from 0 to \(binCount)")) }
            c.model = model
            c.offset = Vector3(o[0], o[1], o[2])
            c.softIron = Matrix3(r0: Vector3(w[0], w[1], w[2]), r1: Vector3(w[3], w[4], w[5]), r2: Vector3(w[6], w[7], w[8]))
            c.strength = s[0]
            c.vertical = numbers("vertical", 1)?[0] ?? 0
            c.residual = r[0]
            c.coverage = Int(k[0])
            if values["lag"] != nil {
                guard let l = numbers("lag", 1), abs(l[0]) <= MagnetometerLag.maximum else {
                    return .failure(.invalid("a lag that is not a number of seconds within ±\(MagnetometerLag.maximum)"))
                }
                c.lag = l[0]
            }
        }
        let w = c.softIron
        guard abs(w.r0.y - w.r1.x) < 1e-9 * max(1, abs(w.r0.y)), abs(w.r0.z - w.r2.x) < 1e-9 * max(1, abs(w.r0.z)),
              abs(w.r1.z - w.r2.y) < 1e-9 * max(1, abs(w.r1.z)) else { return .failure(.invalid("the soft-iron matrix is not symmetric")) }
        let scaled = Fit(offset: Self.unit * c.offset, softIron: w, strength: Self.unit * c.strength, vertical: 0, model: c.model)
        guard isPlausible(scaled) else { return .failure(.invalid("the values are not a plausible calibration")) }
        c.savedCoverage = c.coverage
        c.binCentre = Self.unit * c.offset
        c.isSaved = true
        c.accuracy = c.coverage >= 16 && c.residual < 0.04 ? .medium : .low
        return .success(c)
    }
}
